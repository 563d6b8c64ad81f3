package kubeenv

// CAFile is the cluster CA's certificate: it signed kube-apiserver's
// serving certificate, so it is the root CA pods get in kube-root-ca.crt
// (kube-controller-manager's --root-ca-file).
func (e *Env) CAFile() string { return e.pki.caFile }

// ServiceAccountKeyFile is the private key kube-apiserver signs
// ServiceAccount tokens with (kube-controller-manager's
// --service-account-private-key-file).
func (e *Env) ServiceAccountKeyFile() string { return e.pki.saKeyFile }
