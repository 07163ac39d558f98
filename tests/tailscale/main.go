// Command tslab is the hub of netdoctor's Tailscale lab (tests/src/tailscale.rs): a
// coordination server and a DERP relay with STUN, all from tailscale.com's own test code,
// so that two tailscaled nodes can form a tailnet without reaching the internet.
//
//	tslab --addr 10.200.3.2
//
// listens on ADDR: the control server over HTTP (--control-port), DERP over HTTPS with a
// self-signed certificate (--derp-port; the DERP map marks the node InsecureForTests), STUN
// over UDP (--stun-port). When everything listens it prints one JSON line,
// {"control":"http://ADDR:PORT","derp":"ADDR:PORT","stun":"ADDR:PORT","region":"lab"},
// then serves until SIGTERM or SIGINT.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"tailscale.com/derp/derpserver"
	"tailscale.com/net/stunserver"
	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/key"
	"tailscale.com/types/logger"
)

// RegionCode is the lab's one DERP region, as tailscaled reports it (PeerStatus.Relay).
const RegionCode = "lab"

func main() {
	addr := flag.String("addr", "", "IPv4 address to listen on (required)")
	controlPort := flag.Int("control-port", 8080, "TCP port of the control server (HTTP)")
	derpPort := flag.Int("derp-port", 443, "TCP port of the DERP server (HTTPS)")
	stunPort := flag.Int("stun-port", 3478, "UDP port of the STUN server")
	verbose := flag.Bool("verbose", false, "log the servers' messages to stderr")
	flag.Parse()
	if net.ParseIP(*addr).To4() == nil {
		fmt.Fprintln(os.Stderr, "tslab: --addr must be an IPv4 address")
		os.Exit(2)
	}
	logf := logger.Discard
	if *verbose {
		logf = log.Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	stun := stunserver.New(ctx)
	stunAddr := net.JoinHostPort(*addr, strconv.Itoa(*stunPort))
	if err := stun.Listen(stunAddr); err != nil {
		log.Fatalf("tslab: STUN: %v", err)
	}
	go stun.Serve()

	derp := derpserver.New(key.NewNode(), logf)
	defer derp.Close()
	derpAddr := net.JoinHostPort(*addr, strconv.Itoa(*derpPort))
	derpLn, err := net.Listen("tcp", derpAddr)
	if err != nil {
		log.Fatalf("tslab: DERP: %v", err)
	}
	derpSrv := httptest.NewUnstartedServer(derpserver.Handler(derp))
	derpSrv.Listener.Close()
	derpSrv.Listener = derpLn
	derpSrv.Config.ErrorLog = logger.StdLogger(logf)
	// DERP upgrades the connection itself: no HTTP/2.
	derpSrv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	derpSrv.StartTLS()
	defer derpSrv.Close()

	control := &testcontrol.Server{
		Logf:            logf,
		ExplicitBaseURL: "http://" + net.JoinHostPort(*addr, strconv.Itoa(*controlPort)),
		DERPMap: &tailcfg.DERPMap{Regions: map[int]*tailcfg.DERPRegion{
			1: {
				RegionID:   1,
				RegionCode: RegionCode,
				RegionName: "netdoctor lab",
				Nodes: []*tailcfg.DERPNode{{
					Name:             "1a",
					RegionID:         1,
					HostName:         *addr,
					IPv4:             *addr,
					IPv6:             "none",
					DERPPort:         *derpPort,
					STUNPort:         *stunPort,
					InsecureForTests: true,
				}},
			},
		}},
		AllOnline: true,
	}
	controlLn, err := net.Listen("tcp", net.JoinHostPort(*addr, strconv.Itoa(*controlPort)))
	if err != nil {
		log.Fatalf("tslab: control: %v", err)
	}
	controlSrv := &http.Server{Handler: control, ErrorLog: logger.StdLogger(logf)}
	go controlSrv.Serve(controlLn)
	defer controlSrv.Close()

	ready, _ := json.Marshal(map[string]string{
		"control": control.BaseURL(),
		"derp":    derpAddr,
		"stun":    stunAddr,
		"region":  RegionCode,
	})
	fmt.Println(string(ready))
	<-ctx.Done()
}
