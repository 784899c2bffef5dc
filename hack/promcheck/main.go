// Command promcheck validates Deckhand's monitoring bundle with Prometheus'
// own libraries and prints the metrics it reads, so that a test can check
// each against what the manager exports:
//
//	promcheck [flags] RULES.yaml DASHBOARD.json
//
// RULES.yaml is a PrometheusRule (its spec is a Prometheus rule file);
// DASHBOARD.json a Grafana dashboard whose targets hold PromQL in "expr".
// Beyond parsing, the bundle must:
//
//   - scope every selector of the manager's own metrics to its scrape target:
//     in the rules job and namespace equal to -job and -namespace, in the
//     dashboard job="$job", namespace="$namespace" and instance=~"$instance";
//     metrics of kube-state-metrics (kube_*) and of kube-apiserver
//     (apiserver_*) are other targets' and exempt;
//   - declare the dashboard's namespace, job and instance query variables;
//   - give every alert a runbook_url under -runbook-base naming a page of
//     the -runbooks directory whose title is the alert's name.
//
// The output is JSON: {"rules": N, "expressions": N, "scopedSelectors": N,
// "metrics": [...], "metricPatterns": [...]}, where a pattern is a __name__
// regular expression. Any parse or validation error
// exits 1 naming the rule or panel.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// target is the manager's scrape target as the rules name it, and where
// their runbooks are.
type target struct {
	job, namespace string
	runbookBase    string
	runbooks       string
}

// dashboardVariables are the template variables every dashboard selector of
// the manager's metrics is filtered by, with the matcher each must use.
var dashboardVariables = []*labels.Matcher{
	labels.MustNewMatcher(labels.MatchEqual, "namespace", "$namespace"),
	labels.MustNewMatcher(labels.MatchEqual, "job", "$job"),
	labels.MustNewMatcher(labels.MatchRegexp, "instance", "$instance"),
}

func main() {
	var tg target
	flag.StringVar(&tg.job, "job", "deckhand-controller-manager-metrics-service", "job label of the manager's metrics (the metrics Service's name)")
	flag.StringVar(&tg.namespace, "namespace", "deckhand-system", "namespace label of the manager's metrics")
	flag.StringVar(&tg.runbookBase, "runbook-base", "https://github.com/deckhand-dev/deckhand/blob/main/docs/runbooks", "URL every alert's runbook_url starts with")
	flag.StringVar(&tg.runbooks, "runbooks", "docs/runbooks", "directory holding the runbook pages")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: promcheck [flags] RULES.yaml DASHBOARD.json")
		os.Exit(2)
	}
	res, err := check(tg, flag.Arg(0), flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(out))
}

// ownMetric tells the manager's metrics (and Prometheus' up of its target)
// from kube-state-metrics' and kube-apiserver's, which other targets export.
func ownMetric(name string) bool {
	return !strings.HasPrefix(name, "kube_") && !strings.HasPrefix(name, "apiserver_")
}

// checker parses expressions and collects what they read.
type checker struct {
	p               parser.Parser
	res             *result
	names, patterns map[string]bool
	problems        []error
}

// collect parses expr and checks that each selector of the manager's
// metrics carries every matcher in scope.
func (c *checker) collect(where, expr string, scope []*labels.Matcher) error {
	e, err := c.p.ParseExpr(expr)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	c.res.Expressions++
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		own := vs.Name != "" && ownMetric(vs.Name)
		if vs.Name != "" {
			c.names[vs.Name] = true
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchRegexp {
				c.patterns[m.Value] = true
				own = ownMetric(m.Value)
			}
		}
		if !own {
			return nil
		}
		c.res.ScopedSelectors++
		for _, want := range scope {
			if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == want.Name && m.Type == want.Type && m.Value == want.Value
			}) {
				c.problems = append(c.problems, fmt.Errorf("%s: %s lacks %s", where, vs, want))
			}
		}
		return nil
	})
	return nil
}

// result is what the bundle's queries read, and how many selectors were
// checked for their scope.
type result struct {
	Rules           int      `json:"rules"`
	Expressions     int      `json:"expressions"`
	ScopedSelectors int      `json:"scopedSelectors"`
	Metrics         []string `json:"metrics"`
	MetricPatterns  []string `json:"metricPatterns"`
}

func check(tg target, rulesPath, dashboardPath string) (*result, error) {
	c := &checker{p: parser.NewParser(parser.Options{}), res: &result{}, names: map[string]bool{}, patterns: map[string]bool{}}
	if err := c.rules(tg, rulesPath); err != nil {
		return nil, err
	}
	if err := c.dashboard(dashboardPath); err != nil {
		return nil, err
	}
	if err := errors.Join(c.problems...); err != nil {
		return nil, err
	}
	c.res.Metrics, c.res.MetricPatterns = slices.Sorted(maps.Keys(c.names)), slices.Sorted(maps.Keys(c.patterns))
	return c.res, nil
}

func (c *checker) rules(tg target, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if rule.Kind != "PrometheusRule" {
		return fmt.Errorf("%s: kind %q, want PrometheusRule", path, rule.Kind)
	}
	spec, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		return err
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, c.p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	scope := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "job", tg.job),
		labels.MustNewMatcher(labels.MatchEqual, "namespace", tg.namespace),
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			c.res.Rules++
			where := fmt.Sprintf("%s: rule %s%s", path, r.Alert, r.Record)
			if err := c.collect(where, r.Expr, scope); err != nil {
				return err
			}
			if r.Alert != "" {
				if err := runbook(tg, r.Alert, r.Annotations["runbook_url"]); err != nil {
					c.problems = append(c.problems, fmt.Errorf("%s: %w", where, err))
				}
			}
		}
	}
	return nil
}

// runbook checks that url is a page of the runbooks directory about alert.
func runbook(tg target, alert, url string) error {
	page, ok := strings.CutPrefix(url, tg.runbookBase+"/")
	if !ok || page == "" || strings.Contains(page, "/") {
		return fmt.Errorf("runbook_url %q is not a page under %s", url, tg.runbookBase)
	}
	raw, err := os.ReadFile(filepath.Join(tg.runbooks, page))
	if err != nil {
		return fmt.Errorf("runbook_url %q: %w", url, err)
	}
	if title, _, _ := strings.Cut(string(raw), "\n"); title != "# "+alert {
		return fmt.Errorf("runbook %s is titled %q, want %q", page, title, "# "+alert)
	}
	return nil
}

// variable is a Grafana template variable.
type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
}

func (c *checker) dashboard(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var dash struct {
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, want := range dashboardVariables {
		i := slices.IndexFunc(dash.Templating.List, func(v variable) bool { return v.Name == want.Name })
		if i < 0 {
			c.problems = append(c.problems, fmt.Errorf("%s: no template variable %s", path, want.Name))
			continue
		}
		if v := dash.Templating.List[i]; v.Type != "query" || !strings.HasPrefix(v.Definition, "label_values(") {
			c.problems = append(c.problems, fmt.Errorf("%s: template variable %s is a %s of %q, want a query of label_values", path, v.Name, v.Type, v.Definition))
		}
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			return fmt.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, t := range p.Targets {
			if err := c.collect(fmt.Sprintf("%s: panel %q", path, p.Title), t.Expr, dashboardVariables); err != nil {
				return err
			}
		}
	}
	return nil
}
