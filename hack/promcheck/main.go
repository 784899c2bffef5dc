// Command promcheck validates Deckhand's monitoring bundle with Prometheus'
// own libraries and prints the metrics it reads, so that a test can check
// each against what the manager exports:
//
//	promcheck RULES.yaml DASHBOARD.json
//
// RULES.yaml is a PrometheusRule (its spec is a Prometheus rule file);
// DASHBOARD.json a Grafana dashboard whose targets hold PromQL in "expr".
// The output is JSON: {"rules": N, "expressions": N, "metrics": [...],
// "metricPatterns": [...]}, where a pattern is a __name__ regular expression.
// Any parse or validation error exits 1 naming the rule or panel.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

type result struct {
	Rules          int      `json:"rules"`
	Expressions    int      `json:"expressions"`
	Metrics        []string `json:"metrics"`
	MetricPatterns []string `json:"metricPatterns"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: promcheck RULES.yaml DASHBOARD.json")
		os.Exit(2)
	}
	res, err := check(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(out))
}

func check(rulesPath, dashboardPath string) (*result, error) {
	names, patterns := map[string]bool{}, map[string]bool{}
	res := &result{}
	p := parser.NewParser(parser.Options{})
	collect := func(where, expr string) error {
		e, err := p.ParseExpr(expr)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		res.Expressions++
		parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			if vs.Name != "" {
				names[vs.Name] = true
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchRegexp {
					patterns[m.Value] = true
				}
			}
			return nil
		})
		return nil
	}

	raw, err := os.ReadFile(rulesPath)
	if err != nil {
		return nil, err
	}
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		return nil, fmt.Errorf("%s: %w", rulesPath, err)
	}
	if rule.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: kind %q, want PrometheusRule", rulesPath, rule.Kind)
	}
	spec, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		return nil, err
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", rulesPath, errors.Join(errs...))
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			res.Rules++
			if err := collect(fmt.Sprintf("%s: rule %s%s", rulesPath, r.Alert, r.Record), r.Expr); err != nil {
				return nil, err
			}
		}
	}

	raw, err = os.ReadFile(dashboardPath)
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", dashboardPath, err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", dashboardPath, p.Title)
		}
		for _, t := range p.Targets {
			if err := collect(fmt.Sprintf("%s: panel %q", dashboardPath, p.Title), t.Expr); err != nil {
				return nil, err
			}
		}
	}
	res.Metrics, res.MetricPatterns = slices.Sorted(maps.Keys(names)), slices.Sorted(maps.Keys(patterns))
	return res, nil
}
