package provider_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

func ptr(s string) *string { return &s }

func TestTagFilterConstructors(t *testing.T) {
	six := []string{"a", "b", "c", "d", "e", "f"}
	longest := strings.Repeat("x", provider.MaxTagNameBytes)
	tooLong := strings.Repeat("x", provider.MaxTagNameBytes+1)

	tests := []struct {
		name     string
		build    func() (provider.TagFilter, error)
		wantErr  bool
		wantMode provider.TagMode
		wantTags []string
	}{
		{"zero value is DefaultOnly", func() (provider.TagFilter, error) { return provider.TagFilter{}, nil }, false, provider.TagModeDefaultOnly, nil},
		{"DefaultOnly", func() (provider.TagFilter, error) { return provider.TagFilterDefaultOnly(), nil }, false, provider.TagModeDefaultOnly, nil},
		{"Any", func() (provider.TagFilter, error) { return provider.TagFilterAny(), nil }, false, provider.TagModeAny, nil},
		{"None", func() (provider.TagFilter, error) { return provider.TagFilterNone(), nil }, false, provider.TagModeNone, nil},

		{"Tags one", func() (provider.TagFilter, error) { return provider.TagFilterTags("gpu") }, false, provider.TagModeTags, []string{"gpu"}},
		{"Tags sorted", func() (provider.TagFilter, error) { return provider.TagFilterTags("ssd", "gpu", "arm") }, false, provider.TagModeTags, []string{"arm", "gpu", "ssd"}},
		{"Tags deduped", func() (provider.TagFilter, error) { return provider.TagFilterTags("gpu", "ssd", "gpu", "gpu") }, false, provider.TagModeTags, []string{"gpu", "ssd"}},
		{"Tags five", func() (provider.TagFilter, error) { return provider.TagFilterTags(six[:5]...) }, false, provider.TagModeTags, six[:5]},
		{"Tags six with a duplicate count as five", func() (provider.TagFilter, error) { return provider.TagFilterTags("a", "b", "c", "d", "e", "a") }, false, provider.TagModeTags, six[:5]},
		{"Tags longest name", func() (provider.TagFilter, error) { return provider.TagFilterTags(longest) }, false, provider.TagModeTags, []string{longest}},
		{"Tags unicode", func() (provider.TagFilter, error) { return provider.TagFilterTags("gpu-é", "{tag}:x") }, false, provider.TagModeTags, []string{"gpu-é", "{tag}:x"}},
		{"Tags empty set", func() (provider.TagFilter, error) { return provider.TagFilterTags() }, true, 0, nil},
		{"Tags empty slice", func() (provider.TagFilter, error) { return provider.TagFilterTags([]string{}...) }, true, 0, nil},
		{"Tags six", func() (provider.TagFilter, error) { return provider.TagFilterTags(six...) }, true, 0, nil},
		{"Tags name too long", func() (provider.TagFilter, error) { return provider.TagFilterTags("gpu", tooLong) }, true, 0, nil},
		{"Tags empty name", func() (provider.TagFilter, error) { return provider.TagFilterTags("gpu", "") }, true, 0, nil},

		{"DefaultAnd one", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd("gpu") }, false, provider.TagModeDefaultAnd, []string{"gpu"}},
		{"DefaultAnd sorted and deduped", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd("ssd", "gpu", "ssd") }, false, provider.TagModeDefaultAnd, []string{"gpu", "ssd"}},
		{"DefaultAnd five", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd(six[:5]...) }, false, provider.TagModeDefaultAnd, six[:5]},
		{"DefaultAnd empty set", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd() }, true, 0, nil},
		{"DefaultAnd six", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd(six...) }, true, 0, nil},
		{"DefaultAnd name too long", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd(tooLong) }, true, 0, nil},
		{"DefaultAnd empty name", func() (provider.TagFilter, error) { return provider.TagFilterDefaultAnd("") }, true, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.build()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got filter %v, want an error", f)
				}
				if !errors.Is(err, provider.ErrInvalidInput) {
					t.Errorf("error %q is not ErrInvalidInput", err)
				}
				if f.Validate() == nil {
					t.Errorf("the returned filter %v validates although its constructor failed", f)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if err := f.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if f.Mode() != tt.wantMode {
				t.Errorf("Mode() = %v, want %v", f.Mode(), tt.wantMode)
			}
			if got := f.Tags(); !slices.Equal(got, tt.wantTags) || (tt.wantTags == nil) != (got == nil) {
				t.Errorf("Tags() = %#v, want %#v", got, tt.wantTags)
			}
		})
	}
}

func TestTagFilterDoesNotAlias(t *testing.T) {
	in := []string{"ssd", "gpu"}
	f, err := provider.TagFilterTags(in...)
	if err != nil {
		t.Fatal(err)
	}
	in[0], in[1] = "zzz", "yyy"
	out := f.Tags()
	out[0] = "mutated"
	if got := f.Tags(); !slices.Equal(got, []string{"gpu", "ssd"}) {
		t.Errorf("filter changed through a caller's slice: Tags() = %v", got)
	}
	if !f.Matches(ptr("gpu")) || f.Matches(ptr("zzz")) || f.Matches(ptr("mutated")) {
		t.Error("Matches changed through a caller's slice")
	}
}

func TestTagFilterMatches(t *testing.T) {
	must := func(f provider.TagFilter, err error) provider.TagFilter {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tags := must(provider.TagFilterTags("gpu", "ssd"))
	defaultAnd := must(provider.TagFilterDefaultAnd("gpu", "ssd"))

	// Each filter against: untagged, tagged with its first and its last tag, and tagged with
	// tags outside the set (different, case-changed, prefix, empty).
	type want struct{ untagged, tagIn, lastIn, tagOut bool }
	tests := []struct {
		name   string
		filter provider.TagFilter
		want   want
	}{
		{"zero value", provider.TagFilter{}, want{true, false, false, false}},
		{"DefaultOnly", provider.TagFilterDefaultOnly(), want{true, false, false, false}},
		{"Tags", tags, want{false, true, true, false}},
		{"DefaultAnd", defaultAnd, want{true, true, true, false}},
		{"Any", provider.TagFilterAny(), want{true, true, true, true}},
		{"None", provider.TagFilterNone(), want{false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.Matches(nil); got != tt.want.untagged {
				t.Errorf("Matches(untagged) = %v, want %v", got, tt.want.untagged)
			}
			if got := tt.filter.Matches(ptr("gpu")); got != tt.want.tagIn {
				t.Errorf("Matches(gpu) = %v, want %v", got, tt.want.tagIn)
			}
			if got := tt.filter.Matches(ptr("ssd")); got != tt.want.lastIn {
				t.Errorf("Matches(ssd) = %v, want %v", got, tt.want.lastIn)
			}
			for _, out := range []string{"cpu", "GPU", "gp", "gpus", "zzz", ""} {
				if got := tt.filter.Matches(ptr(out)); got != tt.want.tagOut {
					t.Errorf("Matches(%q) = %v, want %v", out, got, tt.want.tagOut)
				}
			}
		})
	}
}

func TestTagFilterString(t *testing.T) {
	tags, _ := provider.TagFilterTags("ssd", "gpu")
	defaultAnd, _ := provider.TagFilterDefaultAnd("gpu")
	tests := []struct {
		filter provider.TagFilter
		want   string
	}{
		{provider.TagFilterDefaultOnly(), "DefaultOnly"},
		{provider.TagFilterAny(), "Any"},
		{provider.TagFilterNone(), "None"},
		{tags, "Tags[gpu ssd]"},
		{defaultAnd, "DefaultAnd[gpu]"},
	}
	for _, tt := range tests {
		if got := tt.filter.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestNewSemverRange(t *testing.T) {
	tests := []struct {
		name     string
		min, max string
		wantErr  bool
	}{
		{"ordinary", "1.0.0", "2.0.0", false},
		{"single version", "0.1.29", "0.1.29", false},
		{"prerelease bounds", "1.0.0-alpha.1", "1.0.0", false},
		{"min exceeds max", "2.0.0", "1.0.0", true},
		{"min exceeds max by a patch", "1.0.1", "1.0.0", true},
		{"release above its prerelease", "1.0.0", "1.0.0-rc.1", true},
		{"empty min", "", "1.0.0", true},
		{"empty max", "1.0.0", "", true},
		{"min without patch", "1.0", "2.0.0", true},
		{"max major only", "1.0.0", "2", true},
		{"min not a version", "abc", "2.0.0", true},
		{"max not a version", "1.0.0", "1.x.0", true},
		{"four parts", "1.0.0.0", "2.0.0", true},
		{"negative", "-1.0.0", "2.0.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := provider.NewSemverRange(tt.min, tt.max)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NewSemverRange(%q, %q) = %v, want an error", tt.min, tt.max, r)
				}
				if !errors.Is(err, provider.ErrInvalidInput) {
					t.Errorf("error %q is not ErrInvalidInput", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSemverRange(%q, %q): %v", tt.min, tt.max, err)
			}
			if r.Min == nil || r.Max == nil || r.Min.String() != tt.min || r.Max.String() != tt.max {
				t.Errorf("got [%v, %v], want [%s, %s]", r.Min, r.Max, tt.min, tt.max)
			}
		})
	}
}

func TestSemverRangeContains(t *testing.T) {
	r, err := provider.NewSemverRange("1.2.0", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		v    string
		want bool
	}{
		{"1.2.0", true}, // lower bound included
		{"2.0.0", true}, // upper bound included
		{"1.2.1", true},
		{"1.9.99", true},
		{"2.0.0-rc.1", true}, // a prerelease precedes its release
		{"1.1.99", false},
		{"1.2.0-rc.1", false},
		{"2.0.1", false},
		{"2.1.0", false},
		{"0.0.0", false},
		{"10.0.0", false},
	}
	for _, tt := range tests {
		if got := r.Contains(semver.MustParse(tt.v)); got != tt.want {
			t.Errorf("[1.2.0, 2.0.0].Contains(%s) = %v, want %v", tt.v, got, tt.want)
		}
	}
	if r.Contains(nil) {
		t.Error("Contains(nil) = true, want false")
	}
	if (provider.SemverRange{}).Contains(semver.MustParse("1.0.0")) {
		t.Error("the zero SemverRange contains 1.0.0")
	}
}

func TestDispatcherCapabilityFilterIsCompatible(t *testing.T) {
	rng := func(lo, hi string) provider.SemverRange {
		t.Helper()
		r, err := provider.NewSemverRange(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	two := provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{
		rng("0.1.0", "0.1.29"),
		rng("1.0.0", "1.4.0"),
	}}
	one := provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{rng("0.1.29", "0.1.29")}}
	empty := provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{}}
	var none provider.DispatcherCapabilityFilter

	tests := []struct {
		name   string
		filter provider.DispatcherCapabilityFilter
		v      string
		want   bool
	}{
		{"first range, inside", two, "0.1.5", true},
		{"first range, lower bound", two, "0.1.0", true},
		{"first range, upper bound", two, "0.1.29", true},
		{"second range, inside", two, "1.2.3", true}, // any range, not only the first
		{"second range, lower bound", two, "1.0.0", true},
		{"second range, upper bound", two, "1.4.0", true},
		{"between ranges", two, "0.2.0", false},
		{"below all", two, "0.0.9", false},
		{"above all", two, "1.4.1", false},
		{"single version, equal", one, "0.1.29", true},
		{"single version, next", one, "0.1.30", false},
		{"empty list", empty, "0.1.29", false},
		{"nil list", none, "0.1.29", false},
		{"nil list, zero version", none, "0.0.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.IsCompatible(semver.MustParse(tt.v)); got != tt.want {
				t.Errorf("IsCompatible(%s) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
	if two.IsCompatible(nil) {
		t.Error("IsCompatible(nil) = true, want false")
	}
}
