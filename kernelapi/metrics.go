package kernelapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/forkline/forkline/sdk"
)

// Metrics is the kernel's OpenTelemetry meter read by a Prometheus
// exporter: give [Metrics.Option] to sdk.Open or sdk.New and the Metrics
// to Options.Metrics, and GET /metrics answers the kernel's instruments
// (forkline_steps_total, forkline_steps_replayed_total,
// forkline_captures_total, forkline_forks_total, …) in the Prometheus
// text exposition. Each Metrics has its own registry, so two servers in
// one process do not mix their counts.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// NewMetrics returns a meter provider exported to a registry of its own.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("kernelapi: prometheus exporter: %w", err)
	}
	return &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// Provider returns the meter provider the kernel records through.
func (m *Metrics) Provider() metric.MeterProvider { return m.provider }

// Option is sdk.WithMeterProvider(m.Provider()).
func (m *Metrics) Option() sdk.Option { return sdk.WithMeterProvider(m.provider) }

// Shutdown stops the meter provider; /metrics answers nothing new after it.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// metrics answers the Prometheus exposition of Options.Metrics, or 404
// when the server has none.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	if s.opts.Metrics == nil {
		return errorf(http.StatusNotFound, "not_found", "this server exports no metrics (Options.Metrics is nil)")
	}
	s.opts.Metrics.handler.ServeHTTP(w, r)
	return nil
}
