// Package limit is the controller of the adaptive in-flight limit: how many
// records the whole process may have admitted and unfinished, moved between a
// floor and a ceiling from what the pipeline observes of its handler. It is a
// plain data structure like the ledger: no actors, no Kafka, no I/O, no
// locks, no clock (every call passes the time). Its single owner (the
// concurrency actor) serialises access.
//
// The signal is handler latency against its no-load baseline. Latency is
// averaged over windows of samples; the baseline is what a probe measured: from
// time to time the limit is halved (divided by twice the tolerance, below) and
// the mean of a window at it becomes the baseline, so a downstream that became
// slower for everyone raises the baseline instead of pinning the limit at the
// floor, and a long stretch of queueing cannot ratchet it upward. A window at
// the lowered limit that completed nearly as many records as the one before it
// (95 %) ran at the downstream's capacity still, its mean a queue's: the limit
// is lowered again and the next window measured. Before the first probe has
// measured, the baseline is the lowest window mean. Steady windows do not lower
// it afterwards: when the downstream's speed scatters from one moment to the
// next, the lowest of many window means is a lucky one, and against it every
// ordinary window looks queued (the gradient law then held 64 servers
// scattering ±20 % at half their capacity,
// TestScatteredDownstreamIsNotHeldFarUnderItsCapacity). A downstream that
// became faster is found by an early probe, once the latency has stopped
// falling a fifth under the lowest the last probe knew of (a downstream warming
// up, or recovering, gets faster window after window under load), or else by
// the next scheduled one: the law raising the limit against the old baseline
// may keep the latency from falling (in the model, 16 servers warming from 10 ×
// L to L over 4 s after the first probe measured them at 3.6 × L stayed at a
// limit of 3.8 × K, and as many times L, until it). While it falls (a window's
// mean a twentieth or more under the lowest since the last probe), for at most
// four windows in a row, the law does not raise the limit: the ratio against a
// baseline about to move says nothing of queueing. Vegas alone judges against
// the lowest window mean since the last probe, as TCP Vegas's base RTT is a
// minimum.
//
// From the start, with the gradient law (the others start as they did, to
// compare), a slow start doubles the limit each window while the latency
// holds, and hands it to the law at the first window that rises (the limit
// then goes back to the one before the doubling) or fails, at the ceiling,
// or at a window that does not double once the first probe is due
// (Config.SlowStart, slowStartWindow). A downstream warming up hides a
// queue from it: each window is faster, and the queue adds back what the
// warm-up took (in the model, 16 servers warming from 10 × L let a start
// at 4 double to 3 × K before the latency rose); the law and the early
// probe bring such a limit back.
//
// A tolerance over 1 makes the law treat that multiple of the baseline as
// no queue: more records in flight, and more throughput from a downstream
// whose throughput keeps rising well past the point where its latency
// starts to (a soft knee), for more latency.
//
// A transient failure (the downstream refused or timed out) is a congestion
// signal: a window's share f of them multiplies what the law gives by 1 − f/2
// (an outage halves the limit each window), and from 5 % the law may not raise
// it, in that window or the next; permanent failures and records skipped on
// purpose say nothing about congestion and are not samples at all.
package limit

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Law is the control law: how a window's mean latency, against the
// baseline, moves the limit.
type Law int

const (
	// Gradient (Netflix's Gradient2 without its long-term average): the
	// limit is scaled by tolerance × baseline/latency (clamped to [0.5, 1])
	// and given a queue allowance of √limit. At a tolerance of 1 it settles
	// where the downstream queues about √limit records, growing by √limit
	// per window while latency stays at baseline.
	Gradient Law = iota
	// Vegas (TCP Vegas, as in Netflix's VegasLimit): with lg =
	// max(1, log10(limit)) and the queue estimate q = limit × max(0, 1 −
	// tolerance × baseline/latency), the limit grows by 6·lg while q ≤ lg,
	// by lg while q < 3·lg, and falls by lg once q > 6·lg. Its baseline is
	// the lowest window mean since the last probe.
	Vegas
	// AIMD on latency: +1 per window while latency stays under 1.25 ×
	// tolerance × baseline, × 0.9 when it passes it.
	AIMD
)

// String returns the law's setting name.
func (l Law) String() string {
	switch l {
	case Gradient:
		return "gradient"
	case Vegas:
		return "vegas"
	case AIMD:
		return "aimd"
	}
	return fmt.Sprintf("Law(%d)", int(l))
}

// ParseLaw reads a law's setting name.
func ParseLaw(s string) (Law, error) {
	for _, l := range []Law{Gradient, Vegas, AIMD} {
		if l.String() == s {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown control law %q: want gradient, vegas or aimd", s)
}

// Config tunes a Controller. Start from DefaultConfig.
type Config struct {
	// Floor and Ceiling bound the limit.
	Floor, Ceiling int
	// Initial is the limit before the first window; 0 means
	// min(Ceiling, max(Floor, DefaultInitial)).
	Initial int
	Law     Law
	// Tolerance is the multiple of the baseline latency the law treats as
	// no queue, from 1 (the knee: the least latency for the throughput) to
	// MaxTolerance; 0 means 1.
	Tolerance float64
	// A window closes once it is MinWindow old (or twice the latest mean
	// latency, if longer: a limit change shows only after a round trip) and
	// holds MinSamples samples, or, with fewer, once it is MaxWindow old
	// (or that round trip, if longer).
	MinWindow, MaxWindow time.Duration
	MinSamples           int
	// ProbeInterval is how long after a probe ends the next begins (at least
	// twelve windows): the limit halves until a whole window had no more in
	// flight than that (at most four windows), the next window's mean becomes
	// the baseline (unless it completed 95 % of what the window before the
	// probe did: the limit is then lowered again, see stillAtCapacity), and the
	// limit is restored. A window of the probe a tenth of whose attempts failed
	// ends it, the limit left lowered (and shrunk for the failures, as any
	// window's). With a tolerance t the limit is divided by 2t, not 2: t
	// settles it near t times the knee, and half of that is over the knee still
	// (before stillAtCapacity, such a probe measured a queue, and the next
	// settled higher on it each time). 0 never probes (the baseline only
	// falls).
	ProbeInterval time.Duration
	// SlowStart (with the gradient law, the default; the others are there
	// to compare, and start as they did): from the start, the limit
	// doubles each window while the window's mean latency stays within
	// slowStartRise of the slow start's reference and under troubleShare/2
	// of the attempts fail transiently, and ends for good at the first
	// window that breaks either, at the ceiling, or at a window that does
	// not double once a probe is due (slowStartWindow). No probe begins
	// during it. Without it the default law grows by √limit a window, and a
	// process start took about 12 s to reach a downstream's room of 1,024 at
	// 100 ms (issue 28); a downstream with a capacity shows its queue one
	// doubling past it, and the limit goes back to the one before.
	SlowStart bool
}

// DefaultInitial is the limit a controller starts at unless Config.Initial
// says otherwise.
const DefaultInitial = 32

// MaxTolerance bounds Config.Tolerance: at 4 × its no-load latency a
// downstream is queueing three records for each it serves.
const MaxTolerance = 4.0

// DefaultConfig returns the defaults docs/architecture.md describes
// ("Adaptive concurrency").
func DefaultConfig(floor, ceiling int) Config {
	return Config{Floor: floor, Ceiling: ceiling, Law: Gradient, Tolerance: 1,
		MinWindow: 50 * time.Millisecond, MaxWindow: time.Second, MinSamples: 16,
		ProbeInterval: 10 * time.Second, SlowStart: true}
}

// Validate returns an error naming each invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.Floor < 1 || c.Ceiling < c.Floor {
		errs = append(errs, fmt.Errorf("concurrency limit must satisfy 1 <= floor <= ceiling, got floor %d ceiling %d", c.Floor, c.Ceiling))
	}
	if c.Initial != 0 && (c.Initial < c.Floor || c.Initial > c.Ceiling) {
		errs = append(errs, fmt.Errorf("initial concurrency limit %d is outside [%d, %d]", c.Initial, c.Floor, c.Ceiling))
	}
	if c.Tolerance != 0 && !(c.Tolerance >= 1 && c.Tolerance <= MaxTolerance) {
		errs = append(errs, fmt.Errorf("concurrency tolerance must be within [1, %g], got %g", MaxTolerance, c.Tolerance))
	}
	if c.Law < Gradient || c.Law > AIMD {
		errs = append(errs, fmt.Errorf("unknown control law %v", c.Law))
	}
	if c.MinWindow <= 0 || c.MaxWindow < c.MinWindow {
		errs = append(errs, fmt.Errorf("window must satisfy 0 < min <= max, got min %v max %v", c.MinWindow, c.MaxWindow))
	}
	if c.MinSamples < 1 {
		errs = append(errs, fmt.Errorf("window needs at least 1 sample, got %d", c.MinSamples))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("probe interval must not be negative, got %v", c.ProbeInterval))
	}
	return errors.Join(errs...)
}

// Sample is one handler attempt.
type Sample struct {
	// Latency is how long the attempt took, queueing for shared resources
	// included.
	Latency time.Duration
	// Congested: the attempt failed transiently (the downstream refused,
	// timed out or had no connection free). Its latency is not used: a
	// refusal is fast.
	Congested bool
	// InFlight is how many handler calls the process is running as the
	// sample is taken: what the downstream sees (records held back by the
	// ordering gate or waiting to retry are not counted). A window whose
	// largest InFlight is under half the limit
	// is app-limited: the backlog, not the downstream, kept the records few,
	// and its latency says nothing about a larger limit, so it cannot raise
	// the limit.
	InFlight int
}

// Phase is where a controller is in its probe cycle.
type Phase int

const (
	// Steady: the law moves the limit.
	Steady Phase = iota
	// Draining: the limit was lowered for a probe; these windows let the
	// records admitted over it finish.
	Draining
	// Measuring: this window's mean becomes the baseline.
	Measuring
)

// Controller computes the limit. The zero value is not usable; use New.
//
// Guarantee: Limit is always within [Floor, Ceiling].
type Controller struct {
	cfg   Config
	limit float64
	// baseline is the no-load latency: what the last probe measured, or
	// before one has, the lowest window mean (0 before the first window).
	// lowest is the lowest mean since the last probe: the mean it measured
	// or a lower steady window's. measured is set once a probe has.
	baseline, lowest time.Duration
	measured         bool
	// latency and queue are the last window's mean and queue estimate.
	latency time.Duration
	queue   float64

	// The open window.
	start                time.Time
	samples, congested   int
	sum                  time.Duration
	maxInFlight, windows int

	phase        Phase
	saved        float64   // the limit to restore after a probe
	drainWindows int       // windows the probe's drain has lasted
	nextProbe    time.Time // zero until the first window closes
	// probed is the lowest latency the last probe knew of: the mean of
	// the window it began after, or the mean it measured if lower (0
	// before the first probe). unfallen counts the steady windows in a row
	// since then whose mean did not lower the lowest yet was a fifth
	// under probed (see early probes in close).
	probed   time.Duration
	unfallen int
	// rate is the last window's successes a second; probeRate the rate of
	// the window after which the probe last lowered the limit (see
	// stillAtCapacity).
	rate, probeRate float64
	// falls counts the steady windows in a row whose mean fell a
	// twentieth under the lowest since the last probe (see fallingShare).
	falls int
	// failing: the last window's share of transient failures was
	// troubleShare/2 or more (the law may not raise the limit).
	failing bool
	// slowStart: the limit still doubles each window (Config.SlowStart);
	// ssFirst is the first window's mean, ssLowest the lowest mean of the
	// slow start's windows after it (see slowStartWindow).
	slowStart         bool
	ssFirst, ssLowest time.Duration
	// ssBefore is the limit before the last window doubled it (0 when
	// the last window did not).
	ssBefore float64
	// recoverTo is the limit a trouble began at (a window with
	// troubleShare or more of its attempts failing), 0 when there was none
	// since the limit last got back there: once the failures stop, the
	// limit doubles each window back up to it (see recovering).
	recoverTo float64
	// doublingBack: the failures stopped and the limit doubles back
	// towards recoverTo (see recovering).
	doublingBack bool
	// probePutOff: a recovery put the next probe off (probeLater), which
	// it does once per probe.
	probePutOff bool
	// dark: a window of the trouble closed with nothing served;
	// servedAgain is when the first attempt after it was (zero: none yet).
	dark        bool
	servedAgain time.Time
}

// New returns a controller at its initial limit.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	initial := cfg.Initial
	if initial == 0 {
		initial = min(cfg.Ceiling, max(cfg.Floor, DefaultInitial))
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1
	}
	return &Controller{cfg: cfg, limit: float64(initial), slowStart: cfg.SlowStart && cfg.Law == Gradient && initial < cfg.Ceiling}, nil
}

// SlowStart reports whether the limit still doubles each window
// (Config.SlowStart).
func (c *Controller) SlowStart() bool { return c.slowStart }

// Limit returns the limit now.
func (c *Controller) Limit() int { return int(math.Round(c.limit)) }

// Baseline returns the no-load latency estimate the law judges against (0
// before the first window).
func (c *Controller) Baseline() time.Duration {
	if c.cfg.Law == Vegas {
		return c.lowest
	}
	return c.baseline
}

// Latency returns the last window's mean latency (0 before the first window
// with a successful sample).
func (c *Controller) Latency() time.Duration { return c.latency }

// Queue returns the last window's estimate of the records queued in the
// downstream: limit × (1 − Baseline/latency), the tolerance aside.
func (c *Controller) Queue() float64 { return c.queue }

// Phase returns where the controller is in its probe cycle.
func (c *Controller) Phase() Phase { return c.phase }

// Windows returns how many windows have closed.
func (c *Controller) Windows() int { return c.windows }

// Observe adds a sample taken at now and reports whether it closed a window
// (the limit may then have changed).
func (c *Controller) Observe(now time.Time, s Sample) bool {
	if c.recoverTo > 0 {
		switch {
		case !s.Congested && c.dark:
			c.servedAgain, c.dark = now, false
		case s.Congested && !c.servedAgain.IsZero() && now.Add(-s.Latency).Before(c.servedAgain):
			// A failure of an attempt begun before the downstream served
			// again after serving nothing (a client's own retries ran out
			// at the outage's end) says nothing of now: counted, it held
			// the recovery back or ended it, and the limit climbed by the
			// law from the floor.
			return false
		}
	}
	if c.samples == 0 {
		c.start = now
	}
	c.samples++
	if s.Congested {
		c.congested++
	} else {
		c.sum += max(s.Latency, time.Nanosecond) // a mean of 0 would make every ratio undefined
	}
	c.maxInFlight = max(c.maxInFlight, s.InFlight)
	age, length := now.Sub(c.start), c.windowLength()
	// A slow start's first window holds a limit's worth of samples, the
	// records admitted at the start, slow and fast: closed on the first
	// completions, the fastest, its mean was biased low (calls scattering
	// 0.5 to 1.5 × their service time gave a first window 0.77 × the
	// second's in the model), and the slow start judges the second window
	// against it.
	first := c.slowStart && c.ssFirst == 0
	full := age >= length && c.samples >= c.cfg.MinSamples && (!first || c.samples >= c.Limit())
	sparse := age >= max(c.cfg.MaxWindow, length)
	// Two limits' worth of completions are two round trips under load,
	// however a few slow samples skewed the last mean: without this, one
	// slow period would stretch the windows (and the reaction) for minutes.
	busy := !first && age >= c.cfg.MinWindow && c.samples >= max(c.cfg.MinSamples, 2*c.Limit())
	if !full && !sparse && !busy {
		return false
	}
	c.close(now)
	return true
}

// windowLength is how old a window must be before it may close: MinWindow,
// or two round trips at the last mean latency, whichever is longer. It is
// not capped: a window shorter than a round trip would judge a limit by
// records admitted before it was set, and a probe's measuring window would
// take loaded latency for the baseline.
func (c *Controller) windowLength() time.Duration {
	return max(c.cfg.MinWindow, 2*c.latency)
}

func (c *Controller) close(now time.Time) {
	c.windows++
	ok := c.samples - c.congested
	failedShare := float64(c.congested) / float64(c.samples)
	var mean time.Duration
	if ok > 0 {
		mean = c.sum / time.Duration(ok)
	}
	c.rate = float64(ok) / now.Sub(c.start).Seconds()
	maxInFlight := c.maxInFlight
	appLimited := float64(maxInFlight) < c.limit/2
	c.samples, c.congested, c.sum, c.maxInFlight = 0, 0, 0, 0
	if c.nextProbe.IsZero() && c.cfg.ProbeInterval > 0 {
		c.nextProbe = now.Add(c.cfg.ProbeInterval)
	}

	switch c.phase {
	case Draining:
		c.drainWindows++
		switch {
		case failedShare >= troubleShare:
			c.abandonProbe(now, failedShare)
		case maxInFlight <= c.Limit() || c.drainWindows >= maxDrainWindows:
			// The records admitted over the lowered limit have finished
			// (or the drain gave up waiting for those that do not):
			// the next window's records all ran under it.
			c.phase = Measuring
		}
		return
	case Measuring:
		if failedShare >= troubleShare || ok == 0 {
			c.abandonProbe(now, failedShare)
			return
		}
		if !appLimited && c.limit > float64(c.cfg.Floor) && c.rate >= stillAtCapacity*c.probeRate {
			c.lowerForProbe()
			return
		}
		c.baseline, c.lowest, c.latency = mean, mean, mean
		c.measured = true
		c.queue = 0
		if c.probed == 0 || mean < c.probed {
			c.probed = mean
		}
		c.endProbe(now, failedShare)
		return
	}

	if failedShare >= troubleShare && c.recoverTo == 0 {
		c.recoverTo = c.limit // before this window's cut
	}
	if c.recoverTo > 0 && ok == 0 {
		c.dark = true
	}
	falling := false
	if ok > 0 {
		c.latency = mean
		fell := c.lowest > 0 && float64(mean) < (1-fallingShare)*float64(c.lowest)
		if fell {
			c.falls++
		} else {
			c.falls = 0
		}
		falling = fell && c.falls <= maxHeldFalls
		switch {
		case c.lowest == 0 || mean < c.lowest:
			c.lowest = mean
			if !c.measured {
				c.baseline = mean
			}
			c.unfallen = 0
		case c.probed == 0 || float64(mean) < 0.8*float64(c.probed):
			c.unfallen++
		default:
			c.unfallen = 0
		}
		c.queue = max(0, c.limit*(1-float64(c.Baseline())/float64(mean)))
	}
	ss := ssNone
	if c.slowStart {
		ss = c.slowStartWindow(now, ok, mean, failedShare, appLimited || falling)
	}
	next := c.limit
	if ok > 0 {
		next = c.law(mean)
		// An app-limited window says nothing of a larger limit; nor does
		// one with a share of failures near trouble, or the one after it,
		// where a downstream that refuses what is over its capacity would
		// be kept over it (the share scatters from window to window: with
		// K = 16 slots refusing a tenth of the attempts on average, three
		// windows in ten were under troubleShare/2 in the model, and the
		// √limit each of them added outweighed the others' 1 − f/2); nor
		// one whose latency fell well under the lowest since the
		// last probe: the downstream is getting faster whatever the load
		// (warming up, recovering), so the ratio against a baseline that
		// is about to move says nothing of queueing, and raising the
		// limit on it would leave it far over the capacity once the fall
		// ends.
		if (appLimited || falling || failedShare >= troubleShare/2 || c.failing) && next > c.limit {
			next = c.limit
		}
	}
	switch ss {
	case ssDouble:
		c.ssBefore = c.limit
		next = max(next, 2*c.limit)
	case ssRevert:
		next = c.ssBefore
	}
	recovering := c.recovering(now, ok, failedShare)
	if recovering {
		next = max(next, min(2*c.limit, c.recoverTo))
	}
	// Congestion: shrink in proportion to how much of the window failed
	// transiently, at most by half. A background of a few failures only
	// trims what the law gives; an outage (every attempt failing) halves
	// the limit each window. A slow start's doubling is not trimmed: it
	// doubles only under troubleShare/2, and a trimmed last doubling would
	// end the slow start short of the ceiling it ended at.
	if ss != ssDouble && !recovering {
		next *= 1 - failedShare/2
	}
	c.limit = c.clamp(next)
	c.failing = failedShare >= troubleShare/2

	// A probe comes early, as soon as the latency has stopped falling, when no
	// probe has measured the baseline yet or the latency has since fallen by a
	// fifth: a downstream warming up (connections opening, caches filling) or
	// recovering answers faster window after window whatever the load, each
	// window a new lowest mean, so the law sees no queue and raises the limit,
	// and its baseline is a loaded latency (or, once a probe has measured, a
	// slower downstream's). Waiting ProbeInterval would leave the records
	// queueing until then. "Fallen" is against the lowest latency the last
	// probe knew of (the mean of the window it began after, or the mean it
	// measured if lower), and each of the windows must be under it, not only
	// their lowest mean: a downstream whose window means scatter (calls mostly
	// fast, some slow) has lucky windows and unlucky measuring windows, and a
	// probe after each would halve the limit a window in a few. A probe
	// abandoned for failures is not retried before the schedule unless the
	// latency falls by a fifth under the window it began after.
	// Nor while the limit doubles back after an outage: a probe due then
	// (its interval ran out during the outage) lowered the limit to measure
	// and held it there for its drain and measuring windows, while the
	// records woken by the recovery waited for credits (0.5 s at 50 ms
	// calls, end to end).
	early := c.unfallen >= warmedWindows
	if c.cfg.ProbeInterval > 0 && !c.slowStart && c.recoverTo == 0 && (early || !now.Before(c.nextProbe)) && failedShare < troubleShare {
		c.probePutOff = false
		c.saved = c.limit
		c.probed, c.unfallen = c.latency, 0
		c.lowerForProbe()
	}
}

// recovering reports whether a window after a trouble doubles the limit
// back towards the one the trouble began at (recoverTo), as TCP's slow
// start after a timeout climbs back to its threshold: the failures have
// stopped (under troubleShare/2 of the attempts). An outage halves the
// limit each window down to the floor; the law alone then adds √limit a
// window, and the records waiting out the outage, released as the
// downstream serves again, would wait for credits for seconds (1.6 s from 8
// back to 270 in the model, TestLimitRecoversWithinASecondOfAnOutage). The
// latency does not stop it: the first windows after an outage carry the
// attempts that straddled the recovery (a client's own retries of a call
// refused at its end), whose latency says nothing of a queue, and taken
// for one it ended the recovery at once (measured end to end: the limit
// stayed at 39 to 56 where it had been 131). It never doubles past
// recoverTo, a limit the downstream served before the trouble. Failures
// end a recovery under way, and the law judges the latency from there (a
// new trouble remembers its own limit): a downstream that refuses what is
// over its capacity began its trouble over it, and doubling on towards that
// limit at each lull kept one of 4 or 8 slots refusing a fifth of the
// attempts for good (TestALoadSheddingSmallDownstreamIsNotKeptInTrouble).
func (c *Controller) recovering(now time.Time, ok int, failedShare float64) bool {
	if c.recoverTo == 0 {
		return false
	}
	if failedShare >= troubleShare/2 || ok == 0 {
		if c.doublingBack {
			c.endRecovery()
		}
		return false
	}
	c.doublingBack = true
	if c.limit >= c.recoverTo {
		c.endRecovery()
		c.probeLater(now)
		return false
	}
	if 2*c.limit >= c.recoverTo {
		c.endRecovery() // this window gets there
		c.probeLater(now)
	}
	return true
}

// probeLater puts the next scheduled probe a quarter of ProbeInterval
// after a recovery: one due then (its interval ran out in the outage)
// halved the limit to measure just as it got back (end to end: 64 to 31
// for half a second). Not a whole interval: short troubles coming more
// often than that would put off every probe, and the baseline would go
// stale (a downstream slowed for everyone held the limit at its floor).
func (c *Controller) probeLater(now time.Time) {
	if c.cfg.ProbeInterval > 0 && !c.probePutOff {
		if next := now.Add(c.cfg.ProbeInterval / 4); next.After(c.nextProbe) {
			c.nextProbe = next
			// Once per probe: troubles every second put it off for good.
			c.probePutOff = true
		}
	}
}

// endRecovery forgets the trouble: the next one remembers its own limit.
func (c *Controller) endRecovery() {
	c.recoverTo, c.doublingBack, c.dark, c.servedAgain = 0, false, false, time.Time{}
}

// ssAction is what a window of the slow start does to the limit.
type ssAction int

const (
	// ssNone: the law's alone, as without a slow start.
	ssNone ssAction = iota
	// ssDouble: doubled, unless the law gives more.
	ssDouble
	// ssRevert: back to the limit before the last doubling, the last one
	// whose window held (the slow start ended on a rise).
	ssRevert
)

// slowStartWindow judges a window of the slow start: ok successes of the
// given mean, failedShare of the attempts failing transiently, held if the
// window says nothing of room for more (app-limited, or falling: a
// downstream warming up). It ends the slow start on a rise, on failures or
// at the ceiling.
//
// The reference is the lowest mean of the windows after the first; the
// first, at the same limit as the second, is never doubled on, and the
// second ends the slow start if its mean is a quarter over the first's: a
// start over the capacity shows its queue as the latency climbing at one
// limit, and the second window's mean is then a queue's, no reference
// (taken for one, the law's cuts kept each later window's rise under a
// quarter and the slow start doubled 6 × K to 12 × K). The first window
// holds a limit's worth of samples (see Observe), or its mean would be the
// fastest calls' and end most slow starts here.
//
// A window that rose ran at a doubled limit over the capacity (or at one
// the law set, when the last window did not double); the limit goes back
// to the one before the doubling, whose window held. The law judging the
// rise instead would judge it against a baseline that may be the first
// window's, biased low, and cut under the capacity.
//
// A window that does not double once the first scheduled probe is due
// (ProbeInterval after the first window) also ends it, and the probe
// begins: windows that stay app-limited, or a downstream that keeps
// warming, must not hold it, and hold the probes off, for good. While the
// limit doubles, the probe waits: calls of a second take about 12 s to
// double from 32 to 1,024.
func (c *Controller) slowStartWindow(now time.Time, ok int, mean time.Duration, failedShare float64, held bool) ssAction {
	if ok == 0 || failedShare >= troubleShare/2 {
		c.slowStart = false
		return ssNone
	}
	// A window a twentieth under the reference is a downstream getting
	// faster whatever the load, which hides a queue: in the model, doubling
	// into 64 servers warming from 10 × L over 4 s took the limit to 3.7 ×
	// K before the latency rose, and a probe then measured a still-warm
	// latency for the baseline (TestWarmUpDoesNotLeaveALoadedBaseline).
	fell := func(ref time.Duration) bool { return float64(mean) < (1-fallingShare)*float64(ref) }
	switch {
	case c.ssFirst == 0:
		c.ssFirst = mean
		return ssNone
	case c.ssLowest == 0:
		if float64(mean) > slowStartRise*float64(c.ssFirst) {
			c.slowStart = false
			return ssNone
		}
		c.ssLowest = mean
		held = held || fell(c.ssFirst)
	case float64(mean) > slowStartRise*float64(c.ssLowest):
		c.slowStart = false
		if c.ssBefore > 0 {
			return ssRevert
		}
		return ssNone
	default:
		held = held || fell(c.ssLowest)
		c.ssLowest = min(c.ssLowest, mean)
	}
	if held {
		c.ssBefore = 0
		if c.cfg.ProbeInterval > 0 && !now.Before(c.nextProbe) {
			c.slowStart = false
		}
		return ssNone
	}
	if 2*c.limit >= float64(c.cfg.Ceiling) {
		// The latency held at every limit up to the ceiling: the lowest
		// mean is a no-load one, as a probe's would be, and no probe is
		// due for ProbeInterval (see close): one would halve the limit
		// just as the records admitted at the ceiling reach the
		// downstream. A slow start that ends on a rise leaves the early
		// probe its course: the start may have been over the capacity, its
		// lowest mean a queue's.
		c.slowStart = false
		c.probed, c.unfallen = c.lowest, 0
		c.nextProbe = now.Add(max(c.cfg.ProbeInterval, 12*c.windowLength()))
	}
	return ssDouble
}

// slowStartRise is how far over its reference a slow start's window mean
// may be before it counts as a queue: the margin of the AIMD law. The
// windows of a slow start after the first are busy ones (twice the limit's
// worth of samples), whose means scatter far less than a quarter; one
// doubling past a downstream's capacity doubles the latency of the records
// admitted in it.
const slowStartRise = 1.25

// lowerForProbe divides the limit by twice the tolerance and drains, at a
// probe's start or again after its measuring window (stillAtCapacity).
func (c *Controller) lowerForProbe() {
	c.probeRate = c.rate
	c.limit = c.clamp(c.limit / (2 * c.cfg.Tolerance))
	c.phase, c.drainWindows = Draining, 0
}

// stillAtCapacity: a probe's measuring window, not app-limited, that completed
// this share of the successes a second the window before the limit was lowered
// did ran at the downstream's capacity still, the lowered limit over it, and
// its mean is a queue's, not the no-load latency: the probe lowers the limit
// again (down to the floor at most) and measures the window after. Under the
// capacity a window's completions follow the limit: probing a settled limit,
// the measuring window does about half of the window before (medians 0.47 to
// 0.68 over the model's fixed downstreams, K = 16 to 256, and tolerances, 1 to
// 4; at K = 16, with 0.8 for this share, one or two probes in twelve were
// lowered again, a few windows more; so was one now and then when the
// downstream's speed scatters: ±30 %, at most 2 probes of 12; calls of 5 or 200
// ms, up to 10 of 18). Over the capacity they do not follow it, and a limit at
// twice the capacity or more when a probe begins (a cold start, a speed-up the
// law followed against a stale baseline) was probed at the capacity or over,
// and the queue it measured stayed the baseline until the next probe (K = 16 at
// 4 × L, then L, the gradient law: the limit at 1.8 × K for the 6 s after;
// started at 8 × K: the Vegas law's baseline 4 to 4.6 × L 2 s later, AIMD's 2.9
// to 3 × L). Over the capacity the measuring window does about as much as the
// one before (1.0), hence 0.95 and not less: against a downstream with a soft
// knee, whose throughput still rises past the point where its latency starts
// to, the window at the lowered limit does about three quarters of the one
// before, and a window's count scatters by a sixth; at 0.8 the rule fired on
// that scatter end to end and cost a tenth of the throughput (a scratch run of
// make bench's scenario 4, two runs each: 119 systems/s against 132 without the
// rule, fixed G = 32 139).
const stillAtCapacity = 0.95

// troubleShare is the share of a window's attempts failing transiently
// from which the downstream is in trouble: no probe starts, and one under
// way is abandoned (its latencies would say nothing of no load). From half
// of it the law may not raise the limit, in that window or the next.
const troubleShare = 0.1

// fallingShare is how far under the lowest mean since the last probe a
// window's mean must fall for the downstream to count as getting faster
// (the limit is then not raised): a twentieth. Smaller falls are taken for
// the scatter of a steady downstream's window means, and the law raises the
// limit on them.
const fallingShare = 0.05

// maxHeldFalls bounds how many falling windows in a row hold the limit: a
// cold start's fall lasts a few (measured end to end: three windows in one
// run, five in another), and a downstream that keeps getting faster for
// longer (a slow recovery) must not keep the limit where it started,
// starving it; the law moves the limit again from the fifth, as if the
// latency were steady.
const maxHeldFalls = 4

// warmedWindows is how many steady windows in a row, each a fifth under
// the lowest latency the last probe knew of, must leave the lowest mean
// since the probe where it was for the downstream's speed-up to count as
// over (an early probe then begins).
const warmedWindows = 3

// maxDrainWindows bounds a probe's drain: records that never finish (held
// by a pinned record's partition, retrying through backoff) must not keep
// the limit lowered.
const maxDrainWindows = 4

// abandonProbe ends a probe a window of which failed too much (troubleShare
// or more) without restoring the limit: the lowered limit is shrunk for the
// failures like any window's. Restoring the saved limit, shrunk, would admit
// more records to a downstream in trouble: an outage's first window gives
// half the saved limit, which is the lowered limit at a tolerance of 1 (the
// outage did not shrink it) and t times it at a tolerance t.
func (c *Controller) abandonProbe(now time.Time, failedShare float64) {
	if failedShare >= troubleShare && c.recoverTo == 0 {
		// The trouble began at the limit before the probe, not at the
		// probe's lowered one: recovered only to that, the limit climbed
		// the rest by the law (1.65 s back against 0.4 s, K = 1024).
		c.recoverTo = c.saved
	}
	c.saved = c.limit
	c.endProbe(now, failedShare)
}

// endProbe restores the limit saved when the probe began, shrunk for the
// share of the last window that failed.
func (c *Controller) endProbe(now time.Time, failedShare float64) {
	c.limit = c.clamp(c.saved * (1 - failedShare/2))
	c.phase = Steady
	c.failing = failedShare >= troubleShare/2
	// A probe lasts at least three windows; against a slow downstream
	// (windows of seconds) a fixed interval would keep the limit lowered
	// most of the time.
	c.nextProbe = now.Add(max(c.cfg.ProbeInterval, 12*c.windowLength()))
}

// law returns the limit the configured law wants after a window of the given
// mean latency, which may be under the baseline (the ratio is then over 1).
func (c *Controller) law(mean time.Duration) float64 {
	l := c.limit
	ratio := c.cfg.Tolerance * float64(c.Baseline()) / float64(mean)
	switch c.cfg.Law {
	case Vegas:
		lg := math.Max(1, math.Log10(l))
		queue := l * max(0, 1-ratio)
		switch {
		case queue <= lg:
			return l + 6*lg
		case queue < 3*lg:
			return l + lg
		case queue > 6*lg:
			return l - lg
		}
		return l
	case AIMD:
		if ratio < 1/1.25 {
			return l * 0.9
		}
		return l + 1
	}
	g := math.Min(1, math.Max(0.5, ratio))
	return l*g + math.Sqrt(l)
}

func (c *Controller) clamp(l float64) float64 {
	return math.Min(float64(c.cfg.Ceiling), math.Max(float64(c.cfg.Floor), l))
}
