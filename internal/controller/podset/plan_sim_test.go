package podset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// simPhase is where a simulated pod stands.
type simPhase int

const (
	// simStarting: created, not yet available.
	simStarting simPhase = iota
	// simUpdating: images patched in place, not yet available again.
	simUpdating
	simAvailable
	simTerminating
)

type simPod struct {
	pod      *corev1.Pod
	revision int
	inPlace  bool // reached its revision by an in-place update
	phase    simPhase
	// since is the step in which the pod entered its phase; a transitional
	// phase lasts through the plan of the next step.
	since int
}

// simWorld is a fake cluster for planSync: every pod write takes effect at
// once, and every transition (start, in-place restart, termination) is seen
// by exactly one later plan before it completes. Template changes are image
// changes (in-place-able) unless inPlaceAble is false.
type simWorld struct {
	replicas    int
	spec        deckhandv1alpha1.PodSetUpdateStrategy
	inPlaceAble bool
	revision    int
	pods        []*simPod
	step        int
	seq         int
}

func newSimWorld(replicas int, spec deckhandv1alpha1.PodSetUpdateStrategy, inPlaceAble bool) *simWorld {
	w := &simWorld{replicas: replicas, spec: spec, inPlaceAble: inPlaceAble, revision: 1}
	for range replicas {
		w.add(simAvailable)
	}
	return w
}

func (w *simWorld) clock() time.Time { return now.Add(time.Duration(w.step) * 10 * time.Second) }

func (w *simWorld) add(phase simPhase) *simPod {
	w.seq++
	name := fmt.Sprintf("p%03d", w.seq)
	p := &simPod{revision: w.revision, phase: phase, since: w.step,
		pod: mkPod(name, created(w.clock()), node(fmt.Sprintf("node-%d", w.seq%3)))}
	p.setReady(phase == simAvailable, w.clock())
	w.pods = append(w.pods, p)
	return p
}

func (p *simPod) setReady(isReady bool, at time.Time) {
	if isReady {
		ready(at)(p.pod)
	} else {
		notReady(p.pod)
	}
}

func (w *simWorld) strategy() strategy { return resolveStrategy(w.spec, w.replicas) }

// input is what the controller would hand planSync for the world as it is.
func (w *simWorld) input(paused bool) planInput {
	in := planInput{replicas: w.replicas, strategy: w.strategy(), paused: paused, now: w.clock()}
	for _, p := range w.pods {
		if p.phase == simTerminating {
			in.terminating++
			continue
		}
		updated := p.revision == w.revision
		in.pods = append(in.pods, podView{
			pod:            p.pod,
			updated:        updated,
			available:      p.phase == simAvailable,
			inPlaceOK:      !updated && w.inPlaceAble,
			updatedInPlace: updated && p.inPlace,
			updating:       p.phase == simUpdating,
		})
	}
	return in
}

func (w *simWorld) find(pod *corev1.Pod) (*simPod, error) {
	for _, p := range w.pods {
		if p.pod == pod {
			if p.phase == simTerminating {
				return nil, fmt.Errorf("pod %s written after its deletion", pod.Name)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("pod %s is not in the world", pod.Name)
}

// apply carries out pl.
func (w *simWorld) apply(pl plan) error {
	for _, pod := range append(append([]*corev1.Pod(nil), pl.delete...), pl.evict...) {
		p, err := w.find(pod)
		if err != nil {
			return err
		}
		p.phase, p.since = simTerminating, w.step
	}
	for _, pod := range pl.inPlace {
		p, err := w.find(pod)
		if err != nil {
			return err
		}
		if p.revision == w.revision || !w.inPlaceAble {
			return fmt.Errorf("pod %s updated in place but it is not an in-place-able old pod", pod.Name)
		}
		p.revision, p.inPlace, p.phase, p.since = w.revision, true, simUpdating, w.step
		p.setReady(false, w.clock())
	}
	for range pl.create {
		w.add(simStarting)
	}
	return nil
}

// advance completes the transitions that one plan has seen.
func (w *simWorld) advance() {
	kept := w.pods[:0]
	for _, p := range w.pods {
		if p.since < w.step {
			switch p.phase {
			case simTerminating:
				continue
			case simStarting, simUpdating:
				p.phase = simAvailable
				p.setReady(true, w.clock())
			}
		}
		kept = append(kept, p)
	}
	w.pods = kept
	w.step++
}

// counts returns the active pods, the available ones and the active pods
// on the current revision, as a Deployment counts them (terminating pods
// are not replicas).
func (w *simWorld) counts() (active, available, updated int) {
	for _, p := range w.pods {
		if p.phase == simTerminating {
			continue
		}
		active++
		if p.phase == simAvailable {
			available++
		}
		if p.revision == w.revision {
			updated++
		}
	}
	return active, available, updated
}

// names lists the pods of the world in creation order.
func (w *simWorld) names() []string {
	var out []string
	for _, p := range w.pods {
		out = append(out, p.pod.Name)
	}
	return out
}

func (w *simWorld) done() bool {
	active, available, updated := w.counts()
	return active == w.replicas && available == w.replicas && updated == w.replicas && len(w.pods) == w.replicas
}

func (w *simWorld) String() string {
	s := fmt.Sprintf("step %d:", w.step)
	names := []string{"starting", "updating", "available", "terminating"}
	for _, p := range w.pods {
		ip := ""
		if p.inPlace {
			ip = "*"
		}
		s += fmt.Sprintf(" %s(r%d%s %s)", p.pod.Name, p.revision, ip, names[p.phase])
	}
	return s
}

// simRollout changes the template of a settled world and runs planSync
// until the rollout is done, pausing it for pauseFor steps from step
// pauseAt (pauseFor 0: never). It fails if a budget is ever exceeded, if
// the rollout is not done within bound steps, or if the plan is not empty
// once it is.
func simRollout(w *simWorld, pauseAt, pauseFor, bound int) error {
	st := w.strategy()
	maxPods, minAvailable := w.replicas+st.maxSurge, w.replicas-st.maxUnavailable
	w.revision++
	var trace []string
	for w.step = 0; w.step <= bound; {
		if w.done() {
			for range 3 {
				if pl := planSync(w.input(false)); pl.create > 0 || len(pl.delete)+len(pl.evict)+len(pl.inPlace) > 0 {
					return fmt.Errorf("done at step %d, then the plan %+v is not empty: %s", w.step, pl, w)
				}
				w.advance()
			}
			return nil
		}
		paused := pauseFor > 0 && w.step >= pauseAt && w.step < pauseAt+pauseFor
		if err := w.apply(planSync(w.input(paused))); err != nil {
			return fmt.Errorf("%w\n%s", err, joinTrace(trace, w))
		}
		trace = append(trace, w.String())
		active, available, _ := w.counts()
		if active > maxPods {
			return fmt.Errorf("%d pods, more than replicas+maxSurge = %d\n%s", active, maxPods, joinTrace(trace, nil))
		}
		if available < minAvailable {
			return fmt.Errorf("%d pods available, fewer than replicas-maxUnavailable = %d\n%s", available, minAvailable, joinTrace(trace, nil))
		}
		w.advance()
	}
	return fmt.Errorf("not rolled out within %d steps\n%s", bound, joinTrace(trace, w))
}

func joinTrace(trace []string, w *simWorld) string {
	if len(trace) > 30 {
		trace = append([]string{"..."}, trace[len(trace)-30:]...)
	}
	s := ""
	for _, l := range trace {
		s += "  " + l + "\n"
	}
	if w != nil {
		s += "  now " + w.String() + "\n"
	}
	return s
}

// TestPlanSimulatedRollouts runs every update strategy over 1 to 10
// replicas through the simulator: maxSurge and maxUnavailable as integers
// and percentages (0 included wherever admission accepts it), in place,
// in-place disabled, templates that cannot be updated in place, pods
// replaced through evictions, and rollouts paused from various steps. Every
// rollout must end with exactly spec.replicas pods, all on the new
// revision, within a bound of steps, stay there, and never exceed its
// budgets on the way.
func TestPlanSimulatedRollouts(t *testing.T) {
	values := []intstr.IntOrString{
		intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2),
		intstr.FromString("0%"), intstr.FromString("25%"), intstr.FromString("50%"), intstr.FromString("100%"),
	}
	literalZero := func(v intstr.IntOrString) bool { return v.String() == "0" || v.String() == "0%" }
	type mode struct {
		name        string
		inPlace     bool
		inPlaceAble bool
		evict       bool
	}
	modes := []mode{
		{"in-place", true, true, false},
		{"in-place-disabled", false, true, false},
		{"not-in-place-able", true, false, false},
		{"evict", true, false, true},
	}
	pauses := []struct{ at, for_ int }{{0, 0}, {0, 3}, {1, 3}, {2, 3}, {3, 4}}
	runs, worst := 0, map[int]int{}
	for replicas := 1; replicas <= 10; replicas++ {
		for _, surge := range values {
			for _, unavail := range values {
				if literalZero(surge) && literalZero(unavail) {
					continue // refused at admission
				}
				for _, m := range modes {
					for _, pause := range pauses {
						name := fmt.Sprintf("r%d/surge=%s/unavail=%s/%s/pause=%d+%d", replicas, surge.String(), unavail.String(), m.name, pause.at, pause.for_)
						spec := deckhandv1alpha1.PodSetUpdateStrategy{
							MaxSurge: ptr.To(surge), MaxUnavailable: ptr.To(unavail), InPlaceIfPossible: ptr.To(m.inPlace),
						}
						if m.evict {
							spec.PodReplacement = deckhandv1alpha1.EvictPodSetPodReplacement
						}
						w := newSimWorld(replicas, spec, m.inPlaceAble)
						originals := w.names()
						// At worst four steps per old pod (deleted, seen
						// terminating, replacement created, seen starting),
						// a few for the surge to come and go, and the pause.
						bound := 4*replicas + 6 + pause.for_
						if err := simRollout(w, pause.at, pause.for_, bound); err != nil {
							t.Errorf("%s: %v", name, err)
							continue
						}
						if m.inPlace && m.inPlaceAble && pause.for_ == 0 {
							// Every pod that could be updated in place was:
							// what the surge added is what went.
							if got := w.names(); fmt.Sprint(got) != fmt.Sprint(originals) {
								t.Errorf("%s: pods %v after an in-place rollout, want the original %v", name, got, originals)
							}
						}
						runs++
						worst[replicas] = max(worst[replicas], w.step-3-pause.for_)
					}
				}
			}
		}
	}
	t.Logf("%d rollouts; most steps (without pause) by replicas: %v", runs, worst)
}
