package kubeenv

import (
	"path/filepath"
	"testing"
)

// CAFile is the cluster CA's certificate: it signed kube-apiserver's
// serving certificate, so it is the root CA pods get in kube-root-ca.crt
// (kube-controller-manager's --root-ca-file).
func (e *Env) CAFile() string { return e.pki.caFile }

// ServiceAccountKeyFile is the private key kube-apiserver signs
// ServiceAccount tokens with (kube-controller-manager's
// --service-account-private-key-file).
func (e *Env) ServiceAccountKeyFile() string { return e.pki.saKeyFile }

// DeployFile is the absolute path of deploy/NAME in this tree, for a test
// anywhere in it.
func DeployFile(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", name)
}
