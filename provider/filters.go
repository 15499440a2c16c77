package provider

import (
	"fmt"
	"slices"
	"time"

	"github.com/Masterminds/semver/v3"
)

// Limits duroxide's runtime enforces before it calls the provider (runtime/limits.rs, 0.1.29).
const (
	MaxWorkerTags         = 5
	MaxTagNameBytes       = 256
	MaxKVKeys             = 150
	MaxKVValueBytes       = 64 << 10
	MaxCustomStatusBytes  = 256 << 10
	MaxCarryForwardEvents = 100
)

// TagMode is the kind of a TagFilter.
type TagMode int

// The TagFilter modes.
const (
	// TagModeDefaultOnly takes only untagged activities (the zero value).
	TagModeDefaultOnly TagMode = iota
	// TagModeTags takes only activities tagged with one of the filter's tags.
	TagModeTags
	// TagModeDefaultAnd takes untagged activities and those tagged with one of the filter's tags.
	TagModeDefaultAnd
	// TagModeAny takes every activity.
	TagModeAny
	// TagModeNone takes nothing (orchestrator-only runtimes).
	TagModeNone
)

// TagFilter selects which worker items a FetchWorkItem may return, by the items' routing tag.
// The zero value is DefaultOnly. Build others with the TagFilter* constructors.
type TagFilter struct {
	mode TagMode
	tags []string // sorted, unique; only for Tags and DefaultAnd
}

// TagFilterDefaultOnly returns the filter for untagged activities only.
func TagFilterDefaultOnly() TagFilter { return TagFilter{} }

// TagFilterAny returns the filter that takes every activity.
func TagFilterAny() TagFilter { return TagFilter{mode: TagModeAny} }

// TagFilterNone returns the filter that takes nothing.
func TagFilterNone() TagFilter { return TagFilter{mode: TagModeNone} }

// TagFilterTags returns a filter for activities tagged with one of tags (1 to MaxWorkerTags
// distinct non-empty tags of at most MaxTagNameBytes bytes each).
func TagFilterTags(tags ...string) (TagFilter, error) { return newTagFilter(TagModeTags, tags) }

// TagFilterDefaultAnd returns a filter for untagged activities and those tagged with one of tags.
func TagFilterDefaultAnd(tags ...string) (TagFilter, error) {
	return newTagFilter(TagModeDefaultAnd, tags)
}

func newTagFilter(mode TagMode, tags []string) (TagFilter, error) {
	set := slices.Clone(tags)
	slices.Sort(set)
	set = slices.Compact(set)
	f := TagFilter{mode: mode, tags: set}
	return f, f.Validate()
}

// Validate reports whether the filter is well formed; FetchWorkItem rejects filters that are not.
func (f TagFilter) Validate() error {
	switch f.mode {
	case TagModeDefaultOnly, TagModeAny, TagModeNone:
		return nil
	case TagModeTags, TagModeDefaultAnd:
	default:
		return fmt.Errorf("tag filter: unknown mode %d: %w", f.mode, ErrInvalidInput)
	}
	if len(f.tags) == 0 {
		return fmt.Errorf("tag filter needs at least one tag (use TagFilterNone or TagFilterDefaultOnly): %w", ErrInvalidInput)
	}
	if len(f.tags) > MaxWorkerTags {
		return fmt.Errorf("tag filter has %d tags, at most %d allowed: %w", len(f.tags), MaxWorkerTags, ErrInvalidInput)
	}
	for _, t := range f.tags {
		if t == "" || len(t) > MaxTagNameBytes {
			return fmt.Errorf("tag %q: must be 1 to %d bytes: %w", t, MaxTagNameBytes, ErrInvalidInput)
		}
	}
	return nil
}

// Mode returns the filter's mode.
func (f TagFilter) Mode() TagMode { return f.mode }

// Tags returns the filter's tags, sorted (nil for modes without tags).
func (f TagFilter) Tags() []string { return slices.Clone(f.tags) }

// Matches reports whether an activity with the given tag (nil: untagged) passes the filter.
func (f TagFilter) Matches(tag *string) bool {
	switch f.mode {
	case TagModeAny:
		return true
	case TagModeNone:
		return false
	case TagModeDefaultOnly:
		return tag == nil
	case TagModeDefaultAnd:
		if tag == nil {
			return true
		}
	case TagModeTags:
		if tag == nil {
			return false
		}
	}
	_, found := slices.BinarySearch(f.tags, *tag)
	return found
}

// String renders the filter for logs, e.g. "DefaultAnd[gpu]".
func (f TagFilter) String() string {
	names := [...]string{"DefaultOnly", "Tags", "DefaultAnd", "Any", "None"}
	if f.mode < 0 || int(f.mode) >= len(names) {
		return "Invalid"
	}
	if f.tags == nil {
		return names[f.mode]
	}
	return fmt.Sprintf("%s%v", names[f.mode], f.tags)
}

// SemverRange is an inclusive version range [Min, Max].
type SemverRange struct {
	Min *semver.Version
	Max *semver.Version
}

// NewSemverRange parses both bounds; min must not exceed max.
func NewSemverRange(minVersion, maxVersion string) (SemverRange, error) {
	lo, err := semver.StrictNewVersion(minVersion)
	if err != nil {
		return SemverRange{}, fmt.Errorf("semver range min %q: %v: %w", minVersion, err, ErrInvalidInput)
	}
	hi, err := semver.StrictNewVersion(maxVersion)
	if err != nil {
		return SemverRange{}, fmt.Errorf("semver range max %q: %v: %w", maxVersion, err, ErrInvalidInput)
	}
	if lo.GreaterThan(hi) {
		return SemverRange{}, fmt.Errorf("semver range [%s, %s]: min exceeds max: %w", lo, hi, ErrInvalidInput)
	}
	return SemverRange{Min: lo, Max: hi}, nil
}

// Contains reports whether v lies within the range, bounds included.
func (r SemverRange) Contains(v *semver.Version) bool {
	return v != nil && r.Min != nil && r.Max != nil && v.Compare(r.Min) >= 0 && v.Compare(r.Max) <= 0
}

// DispatcherCapabilityFilter restricts FetchOrchestrationItem to instances whose current execution
// is pinned to a duroxide version the dispatcher can replay. An instance without a stored pin is
// always compatible.
//
// Deviation from duroxide 0.1.29's providers (which honour only the first range): a version is
// compatible when it lies in ANY of the ranges, as duroxide's own is_compatible says. An empty list
// matches nothing.
type DispatcherCapabilityFilter struct {
	SupportedDuroxideVersions []SemverRange
}

// IsCompatible reports whether v lies in any of the filter's ranges.
func (f DispatcherCapabilityFilter) IsCompatible(v *semver.Version) bool {
	for _, r := range f.SupportedDuroxideVersions {
		if r.Contains(v) {
			return true
		}
	}
	return false
}

// SessionFetchConfig makes FetchWorkItem session-aware: it may then return items of sessions that
// OwnerID holds, or claim unowned (or expired) sessions for OwnerID for LockTimeout.
type SessionFetchConfig struct {
	// OwnerID identifies the session owner (usually a worker process); many fetch slots may share it.
	OwnerID string
	// LockTimeout is how long a claimed session stays owned without renewal.
	LockTimeout time.Duration
}
