package main

// Connection security from the environment, for every mode:
//
//	KRABKA_CHECK_TLS_CA=ca.pem            TLS, trusting the CA certificates in the file
//	KRABKA_CHECK_TLS_CERT=client.pem      with this client key and certificate (PEM, one file)
//	KRABKA_CHECK_SASL=MECHANISM:USER:PASSWORD   SASL with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512,
//	                                            or OAUTHBEARER with the token as the password

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func securityOpts() []kgo.Opt {
	var opts []kgo.Opt
	if ca := os.Getenv("KRABKA_CHECK_TLS_CA"); ca != "" {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig(ca, os.Getenv("KRABKA_CHECK_TLS_CERT"))))
	}
	if login := os.Getenv("KRABKA_CHECK_SASL"); login != "" {
		parts := strings.SplitN(login, ":", 3)
		if len(parts) != 3 {
			usageExit("KRABKA_CHECK_SASL must be MECHANISM:USER:PASSWORD")
		}
		auth := scram.Auth{User: parts[1], Pass: parts[2]}
		switch parts[0] {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: parts[1], Pass: parts[2]}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
		case "OAUTHBEARER":
			opts = append(opts, kgo.SASL(oauth.Auth{Token: parts[2]}.AsMechanism()))
		default:
			usageExit(fmt.Sprintf("unknown SASL mechanism %q", parts[0]))
		}
	}
	return opts
}

func tlsConfig(caFile, certFile string) *tls.Config {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		usageExit(fmt.Sprintf("KRABKA_CHECK_TLS_CA: %v", err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		usageExit("KRABKA_CHECK_TLS_CA holds no certificate")
	}
	config := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, certFile)
		if err != nil {
			usageExit(fmt.Sprintf("KRABKA_CHECK_TLS_CERT: %v", err))
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config
}
