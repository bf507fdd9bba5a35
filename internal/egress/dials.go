package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// Dials is the set of the local addresses of the connections a Proxy's
// dials (its own and its forwarders') hold open on the host, so that a
// guarded endpoint can tell them from every other client of the host: a
// process on the host the run may reach that relays connections (an
// HTTP proxy, a fetch tool) connects to the endpoint from an address
// that is not in the set.
//
// Each dial binds its socket to a port of its own before it connects,
// and the port is in the set from then until just before the connection
// is closed: so the address is in the set before the endpoint can accept
// the connection, and no other socket of the host's namespace can use
// that port for as long as it is in the set (the socket holds it bound
// to every address of its family). Only Linux records them; elsewhere
// the set stays empty. The zero Dials is an empty set ready to use; a nil
// *Dials records nothing.
type Dials struct {
	mu   sync.Mutex
	open map[netip.AddrPort]int
}

// Has reports whether ap, a client's address as the endpoint sees it, is
// the local address of one of the dials open.
func (d *Dials) Has(ap netip.AddrPort) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open[dialKey(ap.Addr(), ap.Port())] > 0
}

// dialKey is the key of a local address: the port, with the wildcard
// address of its family, which the dial's socket is bound to.
func dialKey(a netip.Addr, port uint16) netip.AddrPort {
	if a.Unmap().Is4() {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), port)
	}
	return netip.AddrPortFrom(netip.IPv6Unspecified(), port)
}

func (d *Dials) add(k netip.AddrPort) {
	d.mu.Lock()
	if d.open == nil {
		d.open = map[netip.AddrPort]int{}
	}
	d.open[k]++
	d.mu.Unlock()
}

func (d *Dials) remove(k netip.AddrPort) {
	d.mu.Lock()
	if n := d.open[k]; n > 1 {
		d.open[k] = n - 1
	} else {
		delete(d.open, k)
	}
	d.mu.Unlock()
}

// errDialReturned refuses a connection attempt of a dial that has
// already returned (the other address family's, under Happy Eyeballs,
// that the net package starts or keeps going after the first success):
// its socket is never bound nor added to the set, so no port of it can
// outlive the dial there.
var errDialReturned = errors.New("egress: the dial this connection attempt belonged to has already returned")

// dial dials addr with dialer, each socket's local address in d from
// before it connects: it returns the connection and its key in d, to
// remove before the connection is closed (!ok: nothing to remove). The
// keys of the sockets the dial tried and closed are removed before it
// returns, and an attempt that comes after that is refused.
func (d *Dials) dial(ctx context.Context, dialer net.Dialer, network, addr string) (c net.Conn, key netip.AddrPort, ok bool, err error) {
	if d == nil {
		c, err = dialer.DialContext(ctx, network, addr)
		return c, key, false, err
	}
	var mu sync.Mutex
	var done bool              // the dial has returned: no more sockets
	var bound []netip.AddrPort // one per socket the dial tried
	prev := dialer.Control
	dialer.Control = func(network, address string, rc syscall.RawConn) error {
		if prev != nil {
			if err := prev(network, address, rc); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if done {
			return errDialReturned
		}
		k, ok, err := bindPort(network, rc)
		if err != nil || !ok {
			return err
		}
		d.add(k)
		bound = append(bound, k)
		return nil
	}
	c, err = dialer.DialContext(ctx, network, addr)
	if c != nil {
		if la, lok := c.LocalAddr().(*net.TCPAddr); lok {
			key = dialKey(la.AddrPort().Addr(), la.AddrPort().Port())
		}
	}
	mu.Lock()
	done = true
	mu.Unlock()
	for _, k := range bound {
		if c != nil && k == key && !ok {
			ok = true // the connection's own: removed before its close
			continue
		}
		d.remove(k) // a socket the dial tried and closed
	}
	return c, key, ok, err
}
