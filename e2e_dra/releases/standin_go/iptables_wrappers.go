// Package iptables is e2e-dra's stand-in for sigs.k8s.io/iptables-wrappers/pkg/iptables, which
// Kubernetes 1.38 moved its iptables client to and which some Go module proxies do not serve.
//
// The client itself is the previous release's k8s.io/kubernetes/pkg/util/iptables, copied
// unchanged into ./internal/legacy when the stand-in is assembled. This file only gives it the
// API the moved package has: a context first on every call that talks to iptables, the runner's
// mode as an argument of New and NewBestEffort, Restore of a whole iptables-save input, and
// Monitor ended by its context instead of a stop channel.
//
// What it does not reproduce: choosing between iptables-legacy and iptables-nft. Both modes run
// the iptables the host has installed, as Kubernetes 1.37 did. The contexts only end Monitor;
// each iptables call is bounded as the previous release bounded it.
package iptables

import (
	"bytes"
	"context"
	"time"

	"k8s.io/utils/set"

	legacy "sigs.k8s.io/iptables-wrappers/pkg/iptables/internal/legacy"
)

type (
	Chain        = legacy.Chain
	Table        = legacy.Table
	Protocol     = legacy.Protocol
	RulePosition = legacy.RulePosition
	ParseError   = legacy.ParseError
	LineData     = legacy.LineData
)

const (
	Prepend = legacy.Prepend
	Append  = legacy.Append

	ProtocolIPv4 = legacy.ProtocolIPv4
	ProtocolIPv6 = legacy.ProtocolIPv6

	TableNAT    = legacy.TableNAT
	TableFilter = legacy.TableFilter
	TableMangle = legacy.TableMangle

	ChainPostrouting = legacy.ChainPostrouting
	ChainPrerouting  = legacy.ChainPrerouting
	ChainOutput      = legacy.ChainOutput
	ChainInput       = legacy.ChainInput
	ChainForward     = legacy.ChainForward
)

// Mode says which iptables binaries a client runs. Here both run the installed ones.
type Mode string

const (
	// DetectHostMode picks iptables-legacy or iptables-nft by what the host already uses.
	DetectHostMode Mode = "detect-host"
	// UseInstalledMode runs whatever "iptables" is on the host.
	UseInstalledMode Mode = "use-installed"
)

// Interface is the moved package's client: the previous release's, with a context first.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	FlushChain(ctx context.Context, table Table, chain Chain) error
	DeleteChain(ctx context.Context, table Table, chain Chain) error
	ChainExists(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	DeleteRule(ctx context.Context, table Table, chain Chain, args ...string) error
	IsIPv6() bool
	Protocol() Protocol
	SaveInto(ctx context.Context, table Table, buffer *bytes.Buffer) error
	Restore(ctx context.Context, data []byte) error
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
	Present(ctx context.Context) error
}

// New returns a client for protocol, or the reason iptables cannot be used for it.
func New(_ context.Context, protocol Protocol, _ Mode) (Interface, error) {
	runner := legacy.New(protocol)
	if err := runner.Present(); err != nil {
		return nil, err
	}
	return adapter{runner}, nil
}

// NewBestEffort returns a client for each protocol iptables supports here, keyed by protocol.
func NewBestEffort(_ context.Context, _ Mode) map[Protocol]Interface {
	clients := map[Protocol]Interface{}
	for family, runner := range legacy.NewBestEffort() {
		clients[Protocol(family)] = adapter{runner}
	}
	return clients
}

// IsNotFoundError tells whether err says that a chain or rule is not there.
func IsNotFoundError(err error) bool { return legacy.IsNotFoundError(err) }

// MakeChainLine is an iptables-save line that declares chain.
func MakeChainLine(chain Chain) string { return legacy.MakeChainLine(chain) }

// GetChainsFromTable lists the chains one table's iptables-save output declares.
func GetChainsFromTable(save []byte) set.Set[Chain] {
	return set.New(legacy.GetChainsFromTable(save).UnsortedList()...)
}

// ExtractLines returns count lines of lines on either side of line, numbered.
func ExtractLines(lines []byte, line, count int) []LineData {
	return legacy.ExtractLines(lines, line, count)
}

type adapter struct{ runner legacy.Interface }

func (a adapter) EnsureChain(_ context.Context, table Table, chain Chain) (bool, error) {
	return a.runner.EnsureChain(table, chain)
}

func (a adapter) FlushChain(_ context.Context, table Table, chain Chain) error {
	return a.runner.FlushChain(table, chain)
}

func (a adapter) DeleteChain(_ context.Context, table Table, chain Chain) error {
	return a.runner.DeleteChain(table, chain)
}

func (a adapter) ChainExists(_ context.Context, table Table, chain Chain) (bool, error) {
	return a.runner.ChainExists(table, chain)
}

func (a adapter) EnsureRule(_ context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	return a.runner.EnsureRule(position, table, chain, args...)
}

func (a adapter) DeleteRule(_ context.Context, table Table, chain Chain, args ...string) error {
	return a.runner.DeleteRule(table, chain, args...)
}

func (a adapter) IsIPv6() bool { return a.runner.IsIPv6() }

func (a adapter) Protocol() Protocol { return a.runner.Protocol() }

func (a adapter) SaveInto(_ context.Context, table Table, buffer *bytes.Buffer) error {
	return a.runner.SaveInto(table, buffer)
}

// Restore loads data (tables with their COMMIT lines) without flushing other rules and keeps
// the counters, as every caller of the previous release's RestoreAll did.
func (a adapter) Restore(_ context.Context, data []byte) error {
	return a.runner.RestoreAll(data, legacy.NoFlushTables, legacy.RestoreCounters)
}

func (a adapter) Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration) {
	a.runner.Monitor(canary, tables, reloadFunc, interval, ctx.Done())
}

func (a adapter) Present(_ context.Context) error { return a.runner.Present() }
