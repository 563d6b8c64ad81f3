// Package v1alpha1 holds plexus's own Kubernetes kinds, both
// cluster-scoped:
//
//   - AttachmentPolicy: the admin's s7.4 policy as an object: Rego modules
//     and data documents that every node verifies and activates. The object
//     holds only what the admin wrote: the nodes watch it, so nothing a node
//     writes may land in it.
//   - PlexusNode: one per node, named after it, written by that node's
//     agent (plexusd, or the installer in thin mode): what the node has
//     installed and enforces, the policy revision among it, for
//     `plexusctl policy status`, `plexusctl explain --node` and kubectl.
//
// deepcopy, the CRDs in deploy/base and the apply configurations are
// generated from these types and their markers (make generate).
//
// +kubebuilder:object:generate=true
// +groupName=plexus.io
// +groupGoName=Plexus
package v1alpha1
