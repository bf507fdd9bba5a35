// Command devserver runs a Temporal server in one process, in memory, on
// 127.0.0.1, for the example's worker and starter and for its end-to-end
// test, on machines where the temporal CLI (temporal server start-dev)
// cannot be installed. It is built from Go modules only: the server's own
// go.temporal.io/server/temporaltest package, which is what the CLI's dev
// server runs too (SQLite in memory, one namespace).
//
// It prints one line, "ADDRESS NAMESPACE", once the server accepts
// connections, and runs until SIGINT or SIGTERM. Everything is lost when
// it stops.
//
// It is a module of its own so that neither clinvoke nor the example's
// module depends on the Temporal server.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := temporaltest.NewServer()
	defer srv.Stop()

	// The namespace is registered by NewServer; a client's health check
	// confirms the frontend answers before the address is announced.
	c := srv.NewClientWithOptions(client.Options{})
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
	c.Close()

	fmt.Printf("%s %s\n", srv.GetFrontendHostPort(), srv.GetDefaultNamespace())
	<-ctx.Done()
}
