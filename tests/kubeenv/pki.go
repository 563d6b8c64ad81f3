package kubeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one environment, generated fresh at Start so
// that no two environments (or runs) trust each other.
type pki struct {
	caPEM []byte

	servingCertFile, servingKeyFile string
	caFile                          string
	saKeyFile, saPubFile            string

	adminCertPEM, adminKeyPEM []byte
}

// certLifetime only has to outlive a test run; a short one keeps a leaked
// key from being useful for long.
const certLifetime = 24 * time.Hour

func newPKI(dir string) (*pki, error) {
	notBefore := time.Now().Add(-time.Hour) // tolerate small clock skew
	notAfter := notBefore.Add(certLifetime)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kubeenv-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, caCert, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}

	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	servingDER, _, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign serving certificate: %w", err)
	}

	// O=system:masters is what makes this client cluster-admin: the group
	// is bound to cluster-admin by the bootstrap RBAC policy and short-circuits
	// authorization.
	adminKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate admin key: %w", err)
	}
	adminDER, _, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubeenv-admin", Organization: []string{"system:masters"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &adminKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign admin certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account signing key: %w", err)
	}

	p := &pki{
		caPEM:           pemBlock("CERTIFICATE", caDER),
		caFile:          filepath.Join(dir, "ca.crt"),
		servingCertFile: filepath.Join(dir, "serving.crt"),
		servingKeyFile:  filepath.Join(dir, "serving.key"),
		saKeyFile:       filepath.Join(dir, "sa.key"),
		saPubFile:       filepath.Join(dir, "sa.pub"),
		adminCertPEM:    pemBlock("CERTIFICATE", adminDER),
	}
	if p.adminKeyPEM, err = keyPEM(adminKey); err != nil {
		return nil, fmt.Errorf("encode admin key: %w", err)
	}
	servingKeyPEM, err := keyPEM(servingKey)
	if err != nil {
		return nil, fmt.Errorf("encode serving key: %w", err)
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, fmt.Errorf("encode service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}

	files := []struct {
		path string
		data []byte
	}{
		{p.caFile, p.caPEM},
		{p.servingCertFile, pemBlock("CERTIFICATE", servingDER)},
		{p.servingKeyFile, servingKeyPEM},
		{p.saKeyFile, saKeyPEM},
		{p.saPubFile, pemBlock("PUBLIC KEY", saPubDER)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return der, cert, nil
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
