package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// netFaults is a fault proxy (toxiproxy, run inside the driver) on every
// link a listener uses: one per (listener slot, broker) — each broker
// advertises, on the client listener of slot k, the address of proxy
// (k, broker), so every connection listener k opens to any broker passes
// it, not only the bootstrap — one in front of PostgreSQL and one in front
// of the platform mock. The driver's own producer and checks use the
// brokers' tools listener, which no fault touches.
type netFaults struct {
	server *toxiproxy.ApiServer
	// brokers[k][n] is the proxy of listener slot k to broker n (0-based).
	brokers  [][]*toxiproxy.Proxy
	database *toxiproxy.Proxy
	platform *toxiproxy.Proxy

	mu     sync.Mutex
	active []string // toxics in place, "proxy/toxic"
}

// A toxic's JSON, as toxiproxy's API takes it.
func toxicJSON(name, kind, stream string, attrs string) string {
	return fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, kind, stream, attrs)
}

// newNetFaults starts a proxy for each listen→upstream pair of clients
// (clients[k] is slot k's pairs, one per broker).
func newNetFaults(clients [][][2]string) (*netFaults, error) {
	// Some toxics log through zerolog's global logger at trace level (a
	// line per interrupted pipe); the run's output is for its figures.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	nf := &netFaults{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
	for k, pairs := range clients {
		var row []*toxiproxy.Proxy
		for n, pair := range pairs {
			p, err := nf.start(fmt.Sprintf("l%d-b%d", k, n+1), pair[0], pair[1])
			if err != nil {
				nf.close()
				return nil, err
			}
			row = append(row, p)
		}
		nf.brokers = append(nf.brokers, row)
	}
	return nf, nil
}

func (nf *netFaults) start(name, listen, upstream string) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(nf.server, name, listen, upstream)
	if err := nf.server.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("proxy %s (%s → %s): %w", name, listen, upstream, err)
	}
	return p, nil
}

// front puts a proxy on a free loopback port in front of upstream
// (host:port) and returns it; its address is its Listen.
func (nf *netFaults) front(name, upstream string) (*toxiproxy.Proxy, error) {
	return nf.start(name, "127.0.0.1:0", upstream)
}

// drop stops and forgets p.
func (nf *netFaults) drop(p *toxiproxy.Proxy) {
	_ = nf.server.Collection.Remove(p.Name)
}

// add puts a toxic on p, in one stream ("upstream": to the server,
// "downstream": to the client).
func (nf *netFaults) add(p *toxiproxy.Proxy, name, kind, stream, attrs string) error {
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxicJSON(name, kind, stream, attrs))); err != nil {
		return fmt.Errorf("toxic %s on %s: %w", name, p.Name, err)
	}
	nf.mu.Lock()
	nf.active = append(nf.active, p.Name+"/"+name)
	nf.mu.Unlock()
	return nil
}

// addBoth puts the same toxic on both streams of p.
func (nf *netFaults) addBoth(p *toxiproxy.Proxy, name, kind, attrs string) error {
	if err := nf.add(p, name+"-up", kind, "upstream", attrs); err != nil {
		return err
	}
	return nf.add(p, name+"-down", kind, "downstream", attrs)
}

// heal removes every toxic from every proxy.
func (nf *netFaults) heal() {
	ctx := context.Background()
	for _, row := range nf.brokers {
		for _, p := range row {
			p.Toxics.ResetToxics(ctx)
		}
	}
	for _, p := range []*toxiproxy.Proxy{nf.database, nf.platform} {
		if p != nil {
			p.Toxics.ResetToxics(ctx)
		}
	}
	nf.mu.Lock()
	nf.active = nil
	nf.mu.Unlock()
}

// allBrokers returns every broker proxy of every slot.
func (nf *netFaults) allBrokers() []*toxiproxy.Proxy {
	var out []*toxiproxy.Proxy
	for _, row := range nf.brokers {
		out = append(out, row...)
	}
	return out
}

func (nf *netFaults) close() {
	_ = nf.server.Collection.Clear()
}

// blackhole makes p accept and never answer: what is sent is dropped, the
// connections stay open (toxiproxy's timeout toxic with no timeout).
func (nf *netFaults) blackhole(p *toxiproxy.Proxy) error {
	return nf.addBoth(p, "blackhole", "timeout", `"timeout":0`)
}

// latency delays what p carries towards the client by base ± jitter
// milliseconds, and towards the server by the same.
func (nf *netFaults) latency(p *toxiproxy.Proxy, base, jitter int) error {
	return nf.addBoth(p, "latency", "latency", fmt.Sprintf(`"latency":%d,"jitter":%d`, base/2, jitter/2))
}

// bandwidth limits p to kbps KB/s each way.
func (nf *netFaults) bandwidth(p *toxiproxy.Proxy, kbps int) error {
	return nf.addBoth(p, "bandwidth", "bandwidth", fmt.Sprintf(`"rate":%d`, kbps))
}

// resets resets every connection through p (TCP RST) ms milliseconds after
// it first carries data.
func (nf *netFaults) resets(p *toxiproxy.Proxy, ms int) error {
	return nf.add(p, "reset", "reset_peer", "upstream", fmt.Sprintf(`"timeout":%d`, ms))
}

// slowClose delays the closing of p's connections by ms milliseconds.
func (nf *netFaults) slowClose(p *toxiproxy.Proxy, ms int) error {
	return nf.addBoth(p, "slow-close", "slow_close", fmt.Sprintf(`"delay":%d`, ms))
}
