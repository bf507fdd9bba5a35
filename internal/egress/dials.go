package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
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

// errDialReturned refuses a connection attempt that the net package
// starts or keeps going after the dial it belongs to returned (the other
// family's, under Happy Eyeballs, of a dial of a name): its socket is
// never bound nor added to the set, so no port of it can outlive the
// dial there.
var errDialReturned = errors.New("egress: the dial this connection attempt belonged to has already returned")

// dial dials addr with dialer, each socket's local address in d from
// before it connects: it returns the connection and its key in d, to
// remove before the connection is closed (!ok: nothing to remove).
//
// A name is resolved here and its addresses dialled one at a time, as
// the net package does (the first family's in turn, the other's from
// dialer.FallbackDelay on, Happy Eyeballs), so that the key of each
// attempt that fails leaves the set as soon as its socket is closed,
// not once the whole dial returns, which another address may keep
// waiting up to its share of the timeout.
func (d *Dials) dial(ctx context.Context, dialer net.Dialer, network, addr string) (net.Conn, netip.AddrPort, bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if d == nil || err != nil || (network != "tcp" && network != "tcp4" && network != "tcp6") {
		return d.dialOne(ctx, dialer, network, addr)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.dialOne(ctx, dialer, network, addr)
	}
	if dialer.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialer.Timeout)
		defer cancel()
	}
	if !dialer.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dialer.Deadline)
		defer cancel()
	}
	dialer.Timeout, dialer.Deadline = 0, time.Time{} // the attempts' share of ctx's deadline instead
	r := dialer.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip"+strings.TrimPrefix(network, "tcp"), host)
	if err != nil {
		return nil, netip.AddrPort{}, false, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	primaries, fallbacks := ips, []netip.Addr(nil)
	if dialer.FallbackDelay >= 0 && len(ips) > 0 {
		primaries = nil
		for _, ip := range ips {
			if ip.Unmap().Is4() == ips[0].Unmap().Is4() {
				primaries = append(primaries, ip)
			} else {
				fallbacks = append(fallbacks, ip)
			}
		}
	}
	if len(fallbacks) == 0 {
		return d.dialSerial(ctx, dialer, network, primaries, port)
	}
	delay := dialer.FallbackDelay
	if delay == 0 {
		delay = 300 * time.Millisecond // the net package's default
	}
	type result struct {
		c       net.Conn
		key     netip.AddrPort
		ok      bool
		err     error
		primary bool
	}
	results := make(chan result)
	returned := make(chan struct{})
	defer close(returned)
	start := func(ctx context.Context, ips []netip.Addr, primary bool) {
		c, key, ok, err := d.dialSerial(ctx, dialer, network, ips, port)
		select {
		case results <- result{c, key, ok, err, primary}:
		case <-returned:
			if c != nil { // the other family's won
				if ok {
					d.remove(key)
				}
				c.Close()
			}
		}
	}
	primaryCtx, primaryCancel := context.WithCancel(ctx)
	defer primaryCancel()
	go start(primaryCtx, primaries, true)
	fallbackTimer := time.NewTimer(delay)
	defer fallbackTimer.Stop()
	var firstErr error
	var primaryDone, fallbackDone bool
	for {
		select {
		case <-fallbackTimer.C:
			fallbackCtx, fallbackCancel := context.WithCancel(ctx)
			defer fallbackCancel()
			go start(fallbackCtx, fallbacks, false)
		case res := <-results:
			if res.err == nil {
				return res.c, res.key, res.ok, nil
			}
			if res.primary {
				primaryDone = true
			} else {
				fallbackDone = true
			}
			if firstErr == nil || res.primary {
				firstErr = res.err // the primary's error, as the net package reports
			}
			if primaryDone && fallbackDone {
				return nil, netip.AddrPort{}, false, firstErr
			}
			if res.primary && fallbackTimer.Stop() {
				fallbackTimer.Reset(0) // the primaries failed: the fallbacks at once
			}
		}
	}
}

// dialSerial dials the addresses ips at port in turn, each with its
// share of the time left to ctx's deadline (as the net package does), and
// returns the first connection made, or the first attempt's error.
func (d *Dials) dialSerial(ctx context.Context, dialer net.Dialer, network string, ips []netip.Addr, port string) (net.Conn, netip.AddrPort, bool, error) {
	var firstErr error
	for i, ip := range ips {
		if err := ctx.Err(); err != nil {
			if firstErr == nil {
				firstErr = &net.OpError{Op: "dial", Net: network, Err: err}
			}
			break
		}
		actx := ctx
		if deadline, has := ctx.Deadline(); has {
			left := time.Until(deadline)
			share := left / time.Duration(len(ips)-i)
			const saneMinimum = 2 * time.Second // the net package's
			if share < saneMinimum {
				share = min(left, saneMinimum)
			}
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, share)
			defer cancel()
		}
		c, key, ok, err := d.dialOne(actx, dialer, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, key, ok, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no suitable address found"}}
	}
	return nil, netip.AddrPort{}, false, firstErr
}

// dialOne dials addr with dialer, each socket's local address in d from
// before it connects, as dial does: the keys of the sockets it tried and
// closed are removed before it returns, and an attempt that comes after
// that is refused.
func (d *Dials) dialOne(ctx context.Context, dialer net.Dialer, network, addr string) (c net.Conn, key netip.AddrPort, ok bool, err error) {
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
