package redisprovider_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// dropProxy is a TCP proxy on loopback in front of a Redis server that can lose replies: once
// armed with dropReplies(n, match), the next n commands whose bytes contain match are forwarded to
// Redis (which runs them), and their replies are thrown away by closing the client's connection,
// as a network failure after the send would.
type dropProxy struct {
	ln       net.Listener
	upstream string
	left     atomic.Int32 // replies still to drop
	match    atomic.Value // []byte
	dropped  atomic.Int32 // replies dropped so far
	mu       sync.Mutex
	conns    []net.Conn
}

func startDropProxy(t testing.TB, upstream string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropProxy{ln: ln, upstream: upstream}
	d.match.Store([]byte{})
	go d.serve()
	t.Cleanup(d.close)
	return d
}

func (d *dropProxy) addr() string { return d.ln.Addr().String() }

// dropReplies arms the proxy: the replies to the next n commands containing match are lost.
func (d *dropProxy) dropReplies(n int, match string) {
	d.match.Store([]byte(match))
	d.left.Store(int32(n))
}

func (d *dropProxy) close() {
	_ = d.ln.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
}

func (d *dropProxy) serve() {
	for {
		client, err := d.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", d.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		d.mu.Lock()
		d.conns = append(d.conns, client, server)
		d.mu.Unlock()
		var dropNext atomic.Bool
		go func() { // client -> server
			defer server.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					m := d.match.Load().([]byte)
					if len(m) > 0 && bytes.Contains(buf[:n], m) && d.left.Add(-1) >= 0 {
						dropNext.Store(true)
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && dropNext.Load() {
					d.dropped.Add(1)
					_ = server.Close() // the command ran; its reply is lost with the connection
					return
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}
