//go:build chaos

package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"time"

	"github.com/navique/lockguard/certs"
)

// servedSerial returns the serial number of the certificate served at
// addr, verified against the authority.
func servedSerial(addr string, a *certs.Authority) (*big.Int, error) {
	pool := x509.NewCertPool()
	pool.AddCert(a.Cert)
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}
