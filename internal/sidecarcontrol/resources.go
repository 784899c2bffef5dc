package sidecarcontrol

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// The budget of a resourcesPolicy expression. A SidecarSet author is
// trusted with its sidecars, not with the manager's CPU and memory: an
// expression is judged before it runs, and stopped if it runs over.
//
// Note: the environment has no macros (map, filter, all, exists,
// exists_one, has). What resourcesPolicy computes, arithmetic over two
// doubles with quantity, max and min (docs/sidecarset.md), needs no
// iteration, and without macros CEL has no loop: the work of an expression
// is linear in its length, which the parser bounds. The cost limits bound
// what is left (string and list operators) and hold should the language
// grow.
const (
	// maxExprLength is the CRD's maxLength of an expression, enforced again
	// here for a review that did not come through the API server.
	maxExprLength = 1024
	// maxExprCost bounds both the static estimate of an expression (at
	// validation and whenever a SidecarSet is compiled for injection) and
	// its actual cost at every evaluation, in CEL cost units (about one per
	// operation). The documented examples cost under 10.
	maxExprCost = 1000
	// sampleEvalTimeout bounds the evaluation on sample values at
	// validation.
	sampleEvalTimeout = 100 * time.Millisecond
)

// resourcesEnv is the CEL environment of resourcesPolicy expressions: the
// aggregate of the target containers as the doubles cpu (cores) and memory
// (bytes), quantity('250m') for constants, and max and min for bounds.
var resourcesEnv = func() *cel.Env {
	binary := func(f func(a, b float64) float64) cel.OverloadOpt {
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			x, ok1 := a.(types.Double)
			y, ok2 := b.(types.Double)
			if !ok1 || !ok2 {
				return types.NewErr("max and min take two doubles")
			}
			return types.Double(f(float64(x), float64(y)))
		})
	}
	env, err := cel.NewEnv(
		cel.ClearMacros(),
		cel.ParserExpressionSizeLimit(maxExprLength),
		cel.Variable("cpu", cel.DoubleType),
		cel.Variable("memory", cel.DoubleType),
		cel.Function("quantity", cel.Overload("deckhand_quantity_string", []*cel.Type{cel.StringType}, cel.DoubleType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.NewErr("quantity takes a string")
				}
				q, err := resource.ParseQuantity(string(s))
				if err != nil {
					return types.NewErr("quantity(%q): %v", string(s), err)
				}
				return types.Double(q.AsApproximateFloat64())
			}))),
		cel.Function("max", cel.Overload("deckhand_max_double_double", []*cel.Type{cel.DoubleType, cel.DoubleType}, cel.DoubleType, binary(math.Max))),
		cel.Function("min", cel.Overload("deckhand_min_double_double", []*cel.Type{cel.DoubleType, cel.DoubleType}, cel.DoubleType, binary(math.Min))),
	)
	if err != nil {
		panic(err)
	}
	return env
}()

// ResourcesProgram is a sidecar's resourcesPolicy compiled: the name
// pattern of its targets and one CEL program per expression. Compiled once
// per SidecarSet generation, evaluated per pod.
type ResourcesProgram struct {
	max     bool
	targets *regexp.Regexp // nil: every container
	// exprs are limits.cpu, limits.memory, requests.cpu, requests.memory
	// (nil where the expression is empty).
	exprs [4]cel.Program
}

// ResourcesError is a resourcesPolicy that does not compile: Field is the
// path below resourcesPolicy ("resourceExpr.limits.cpu").
type ResourcesError struct {
	Field, Value, Message string
}

// CompileResourcesPolicy compiles p, and evaluates every expression once on
// sample values so that a bad quantity() argument shows at validation.
func CompileResourcesPolicy(p *deckhandv1alpha1.ResourcesPolicy) (*ResourcesProgram, []ResourcesError) {
	rp := &ResourcesProgram{max: p.TargetContainerMode == deckhandv1alpha1.ResourcesTargetContainerModeMax}
	var errs []ResourcesError
	switch p.TargetContainerMode {
	case "", deckhandv1alpha1.ResourcesTargetContainerModeSum, deckhandv1alpha1.ResourcesTargetContainerModeMax:
	default:
		errs = append(errs, ResourcesError{"targetContainerMode", string(p.TargetContainerMode), "must be sum or max"})
	}
	if p.TargetContainersNameRegex != "" {
		re, err := regexp.Compile(p.TargetContainersNameRegex)
		if err != nil {
			errs = append(errs, ResourcesError{"targetContainersNameRegex", p.TargetContainersNameRegex, err.Error()})
		}
		rp.targets = re
	}
	var pairs [2]*deckhandv1alpha1.ResourceExprPair
	pairs[0], pairs[1] = p.ResourceExpr.Limits, p.ResourceExpr.Requests
	any := false
	for i, pair := range pairs {
		if pair == nil {
			continue
		}
		for j, expr := range []string{pair.CPU, pair.Memory} {
			if expr == "" {
				continue
			}
			any = true
			path := "resourceExpr." + []string{"limits", "requests"}[i] + "." + []string{"cpu", "memory"}[j]
			prg, msg := compileExpr(expr)
			if msg != "" {
				errs = append(errs, ResourcesError{path, expr, msg})
				continue
			}
			rp.exprs[2*i+j] = prg
		}
	}
	if !any {
		errs = append(errs, ResourcesError{"resourceExpr", "", "at least one of limits.cpu, limits.memory, requests.cpu, requests.memory is required"})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return rp, nil
}

func compileExpr(expr string) (cel.Program, string) {
	ast, iss := resourcesEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, issueMessage(iss)
	}
	if t := ast.OutputType(); !t.IsExactType(cel.DoubleType) && !t.IsExactType(cel.IntType) {
		return nil, fmt.Sprintf("must evaluate to a double (cores or bytes), not %s", t)
	}
	est, err := resourcesEnv.EstimateCost(ast, noEstimates{})
	if err != nil {
		return nil, err.Error()
	}
	if est.Max > maxExprCost {
		return nil, fmt.Sprintf("estimated cost %d exceeds the budget of %d", est.Max, maxExprCost)
	}
	prg, err := resourcesEnv.Program(ast, cel.CostLimit(maxExprCost), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), sampleEvalTimeout)
	defer cancel()
	if _, _, err := prg.ContextEval(ctx, map[string]any{"cpu": 1.0, "memory": float64(1 << 30)}); err != nil {
		return nil, err.Error()
	}
	return prg, ""
}

// macros are CEL's standard macros, which the environment leaves out.
var macros = []string{"map", "filter", "all", "exists", "exists_one", "has"}

// issueMessage is the first of iss's errors, without the source excerpt
// CEL repeats under each (the field's value already shows the expression).
func issueMessage(iss *cel.Issues) string {
	errs := iss.Errors()
	first := errs[0]
	msg := first.Message
	for _, m := range macros {
		if strings.Contains(msg, "undeclared reference to '"+m+"'") {
			msg = m + "() is not available: an expression is arithmetic on cpu and memory, without CEL's macros (" + strings.Join(macros, ", ") + ")"
			break
		}
	}
	out := msg
	if l := first.Location; l.Line() > 0 {
		out = fmt.Sprintf("%d:%d: %s", l.Line(), l.Column()+1, msg)
	}
	if len(errs) > 1 {
		out += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return out
}

// noEstimates lets CEL's defaults estimate every size and call: the
// variables are doubles and the functions constant-time.
type noEstimates struct{}

func (noEstimates) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }

func (noEstimates) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Compute returns the sidecar's requests and limits for a pod whose own
// containers are apps, and false when no container is a target (the
// policy then sets nothing).
func (rp *ResourcesProgram) Compute(apps []NamedResources) (corev1.ResourceRequirements, bool) {
	var out corev1.ResourceRequirements
	var limits, requests [2]float64 // cpu, memory
	unlimited := [2]bool{}
	found := false
	for _, a := range apps {
		if rp.targets != nil && !rp.targets.MatchString(a.Name) {
			continue
		}
		found = true
		for k := range 2 { // cpu, memory
			if a.HasLimit[k] {
				limits[k] = rp.aggregate(limits[k], a.Limits[k])
			} else {
				unlimited[k] = true
			}
			if a.HasRequest[k] {
				requests[k] = rp.aggregate(requests[k], a.Requests[k])
			} else if a.HasLimit[k] {
				// The API server defaults a missing request to the limit.
				requests[k] = rp.aggregate(requests[k], a.Limits[k])
			}
		}
	}
	if !found {
		return out, false
	}
	for k := range limits {
		if unlimited[k] {
			limits[k] = math.Inf(1)
		}
	}
	out.Limits = rp.eval(rp.exprs[0:2], limits, unlimited)
	out.Requests = rp.eval(rp.exprs[2:4], requests, [2]bool{})
	// A request above its limit would make the API server refuse the pod.
	for name, req := range out.Requests {
		if lim, ok := out.Limits[name]; ok && req.Cmp(lim) > 0 {
			out.Requests[name] = lim.DeepCopy()
		}
	}
	return out, true
}

func (rp *ResourcesProgram) aggregate(acc, v float64) float64 {
	if rp.max {
		return math.Max(acc, v)
	}
	return acc + v
}

// eval evaluates the cpu and memory programs on the aggregate; skip marks a
// resource whose aggregate is unlimited (its expression is not evaluated).
func (rp *ResourcesProgram) eval(prgs []cel.Program, agg [2]float64, skip [2]bool) corev1.ResourceList {
	var out corev1.ResourceList
	vars := &aggregateVars{cpu: types.Double(agg[0]), memory: types.Double(agg[1])}
	for k, prg := range prgs {
		if prg == nil || skip[k] {
			continue
		}
		v, _, err := prg.Eval(vars)
		if err != nil {
			continue
		}
		var f float64
		switch x := v.(type) {
		case types.Double:
			f = float64(x)
		case types.Int:
			f = float64(x)
		default:
			continue
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e18 {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		if k == 0 {
			out[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(f*1000-1e-9)), resource.DecimalSI)
		} else {
			out[corev1.ResourceMemory] = *resource.NewQuantity(int64(math.Ceil(f-1e-9)), resource.BinarySI)
		}
	}
	return out
}

// CPUMemory is a container's CPU and memory limits and requests as
// numbers (cores and bytes), index 0 CPU and 1 memory: what a
// resourcesPolicy reads, without a ResourceList map per container.
type CPUMemory struct {
	Limits, Requests     [2]float64
	HasLimit, HasRequest [2]bool
}

// NamedResources is one of the pod's own containers: its name and its CPU
// and memory.
type NamedResources struct {
	Name string
	CPUMemory
}

// NamedResourcesOf returns the container name's CPU and memory in r.
func NamedResourcesOf(name string, r *corev1.ResourceRequirements) NamedResources {
	n := NamedResources{Name: name}
	for k, res := range [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Limits[res]; ok {
			n.Limits[k], n.HasLimit[k] = q.AsApproximateFloat64(), true
		}
		if q, ok := r.Requests[res]; ok {
			n.Requests[k], n.HasRequest[k] = q.AsApproximateFloat64(), true
		}
	}
	return n
}

// compileResources compiles the resourcesPolicy of every sidecar of s, by
// container name; nil when none has one. A policy that does not compile
// (validation refuses it) computes nothing.
func compileResources(s *deckhandv1alpha1.SidecarSet) map[string]*ResourcesProgram {
	var out map[string]*ResourcesProgram
	for _, list := range [][]deckhandv1alpha1.SidecarContainer{s.Spec.InitContainers, s.Spec.Containers} {
		for i := range list {
			if list[i].ResourcesPolicy == nil {
				continue
			}
			rp, errs := CompileResourcesPolicy(list[i].ResourcesPolicy)
			if len(errs) > 0 {
				continue
			}
			if out == nil {
				out = map[string]*ResourcesProgram{}
			}
			out[list[i].Name] = rp
		}
	}
	return out
}

// aggregateVars are the variables of an evaluation: an activation of its
// own spares a map per pod.
type aggregateVars struct{ cpu, memory types.Double }

// ResolveName implements interpreter.Activation.
func (v *aggregateVars) ResolveName(name string) (any, bool) {
	switch name {
	case "cpu":
		return v.cpu, true
	case "memory":
		return v.memory, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (v *aggregateVars) Parent() interpreter.Activation { return nil }
