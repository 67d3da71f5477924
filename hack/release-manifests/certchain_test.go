package main

import (
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// checkCertificateChain checks cert-manager's objects of the components: one self-signed Issuer
// that signs one CA Certificate (isCA), one CA Issuer that uses that CA's Secret, and every other
// Certificate (the webhook's and the metrics endpoint's, not CAs) signed by the CA Issuer. It
// returns the CA Certificate, whose certificate the webhooks' caBundle must be.
func checkCertificateChain(g Gomega, issuers, certs []*unstructured.Unstructured) *unstructured.Unstructured {
	var selfSigned, caIssuer *unstructured.Unstructured
	for _, i := range issuers {
		_, isSelfSigned, _ := unstructured.NestedMap(i.Object, "spec", "selfSigned")
		_, isCA, _ := unstructured.NestedMap(i.Object, "spec", "ca")
		switch {
		case isSelfSigned:
			g.Expect(selfSigned).To(BeNil(), "one self-signed Issuer")
			selfSigned = i
		case isCA:
			g.Expect(caIssuer).To(BeNil(), "one CA Issuer")
			caIssuer = i
		default:
			g.Expect(i.Object).To(BeNil(), "an Issuer that is neither self-signed nor a CA")
		}
	}
	g.Expect(selfSigned).NotTo(BeNil(), "a self-signed root Issuer")
	g.Expect(caIssuer).NotTo(BeNil(), "a CA Issuer")
	caSecret, _, _ := unstructured.NestedString(caIssuer.Object, "spec", "ca", "secretName")

	var ca *unstructured.Unstructured
	leaves := 0
	for _, c := range certs {
		isCA, _, _ := unstructured.NestedBool(c.Object, "spec", "isCA")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "kind")
		issuer, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		secretName, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		g.Expect(kind).To(Equal("Issuer"), c.GetName())
		if isCA {
			g.Expect(ca).To(BeNil(), "one CA Certificate")
			ca = c
			g.Expect(issuer).To(Equal(selfSigned.GetName()), "the CA is signed by the self-signed root Issuer")
			g.Expect(secretName).To(Equal(caSecret), "the CA Issuer signs with the CA Certificate's Secret")
			continue
		}
		leaves++
		g.Expect(issuer).To(Equal(caIssuer.GetName()), "serving Certificate %s is signed by the CA Issuer, so its renewal changes no caBundle", c.GetName())
	}
	g.Expect(ca).NotTo(BeNil(), "a CA Certificate (isCA: true)")
	g.Expect(leaves).To(Equal(2), "the webhook's and the metrics endpoint's serving Certificates")
	return ca
}
