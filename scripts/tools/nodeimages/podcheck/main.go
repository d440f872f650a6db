// Command podcheck is what the local stack's test pods use to reach things: busybox's wget speaks no TLS the API
// server accepts and its nc cannot only connect.
//
//	podcheck get URL     prints the body of a GET; over HTTPS with the pod's service-account token and CA
//	podcheck dial ADDR   connects to host:port over TCP, then hangs up
//
// It exits 1, saying why, when the request fails or the status is not 2xx.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if len(os.Args) != 3 {
		fail(fmt.Errorf("usage: podcheck get URL | podcheck dial HOST:PORT"))
	}
	var err error
	switch os.Args[1] {
	case "get":
		err = get(os.Args[2])
	case "dial":
		var conn net.Conn
		if conn, err = net.DialTimeout("tcp", os.Args[2], 5*time.Second); err == nil {
			err = conn.Close()
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func get(url string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if strings.HasPrefix(url, "https://") {
		ca, err := os.ReadFile(serviceAccount + "ca.crt")
		if err != nil {
			return err
		}
		token, err := os.ReadFile(serviceAccount + "token")
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Print(string(body))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "podcheck:", err)
	os.Exit(1)
}
