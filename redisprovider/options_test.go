package redisprovider_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// selfSigned returns a server TLS config for 127.0.0.1 and a client config trusting it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

// TestOptionsConnectWithACLUserAndTLS: an ACL user and TLS need no hand-built
// client; both the script connections and the blocking ones use them.
func TestOptionsConnectWithACLUserAndTLS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	serverTLS, clientTLS := selfSigned(t)
	mr := miniredis.NewMiniRedis()
	mr.RequireUserAuth("dxuser", "s3cret")
	if err := mr.StartTLS(serverTLS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Close)
	if _, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Logger: quietLogger,
		Username: "dxuser", Password: "wrong", TLSConfig: clientTLS}); err == nil {
		t.Fatal("New with a wrong password succeeded")
	}
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Logger: quietLogger,
		Username: "dxuser", Password: "s3cret", TLSConfig: clientTLS})
	if err != nil {
		t.Fatalf("New with the ACL user over TLS: %v", err)
	}
	defer p.Close()
	type fetched struct {
		it  *provider.LockedOrchestrationItem
		err error
	}
	got := make(chan fetched, 1)
	go func() {
		it, err := p.FetchOrchestrationItem(ctx, time.Second, 5*time.Second, nil)
		got <- fetched{it, err}
	}()
	waitOrchWaiters(t, p, 1) // the fetch is waiting on the blocking connection
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	if f := <-got; f.err != nil || f.it == nil {
		t.Fatalf("long-polling fetch with the ACL user over TLS: %v %v", f.it, f.err)
	}
}

// A caller's short deadline is honoured against a server that accepts connections and never
// answers (before, calls waited out go-redis's 3 s read timeout and New its 5 s).
func TestShortDeadlineHonouredOnHungServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := redisprovider.New(ctx, redisprovider.Options{Addr: ln.Addr().String(), Namespace: "hung", Logger: quietLogger}); err == nil {
		t.Fatal("New against a server that never answers succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("New with a 300 ms deadline returned after %v", d)
	}
}
