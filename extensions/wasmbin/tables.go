package wasmbin

import (
	"errors"
	"fmt"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// ErrTableLimit is wrapped by BoundTables' errors about a module whose
// tables need more entries than the bound allows.
var ErrTableLimit = errors.New("table bound exceeded")

// BoundTables returns bin with a maximum declared on every table it
// defines, so that table.grow past it returns -1 instead of growing the
// host: wazero allocates a table's entries in host memory, outside the
// memory cap, and a table without a maximum (Go's) may grow to four
// billion entries.
//
// maxEntries bounds all tables together: their minimums must fit in it,
// the rest is shared evenly as room to grow, and a smaller declared
// maximum is kept. A module importing a table is refused, since the
// exporter would bound its growth. Only the table section changes.
func BoundTables(bin []byte, maxEntries uint32) ([]byte, error) {
	sections, err := wasmfmt.Sections(bin)
	if err != nil {
		return nil, formatError{err}
	}
	var table *wasmfmt.Section
	for i := range sections {
		switch sections[i].ID {
		case wasmfmt.SectionImport:
			d := wasmfmt.NewDecoder(sections[i].Body)
			imps := d.Imports()
			if d.Err() != nil {
				return nil, formatError{fmt.Errorf("import section: %w", d.Err())}
			}
			for _, imp := range imps {
				if imp.Kind == wasmfmt.KindTable {
					return nil, fmt.Errorf("%w: imports table %s.%s, whose growth the host cannot bound", ErrTableLimit, imp.Module, imp.Name)
				}
			}
		case wasmfmt.SectionTable:
			table = &sections[i]
		}
	}
	if table == nil {
		return bin, nil
	}
	body, err := boundTableSection(table.Body, maxEntries)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(bin)+16)
	out = append(out, bin[:len(wasmfmt.Header)]...)
	for _, s := range sections {
		if s.ID == wasmfmt.SectionTable {
			s.Body = body
		}
		out = wasmfmt.AppendSection(out, s.ID, s.Body)
	}
	return out, nil
}

// tableType is one entry of the table section, split around its limits.
type tableType struct {
	head, tail []byte
	lim        wasmfmt.Limits
}

func boundTableSection(body []byte, maxEntries uint32) ([]byte, error) {
	d := wasmfmt.NewDecoder(body)
	n := d.Count("tables")
	var tables []tableType
	var mins uint64
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		head, lim, tail := d.TableType()
		tables = append(tables, tableType{head, tail, lim})
		mins += uint64(lim.Min)
	}
	if d.Err() == nil && d.Len() != 0 {
		return nil, formatError{fmt.Errorf("%w: table section: %d bytes left after its content", wasmfmt.ErrMalformed, d.Len())}
	}
	if d.Err() != nil {
		return nil, formatError{fmt.Errorf("table section: %w", d.Err())}
	}
	if len(tables) == 0 {
		return body, nil
	}
	if mins > uint64(maxEntries) {
		return nil, fmt.Errorf("%w: %s, more than the %d entries allowed", ErrTableLimit, describe(tables, mins), maxEntries)
	}
	room := (uint64(maxEntries) - mins) / uint64(len(tables))
	out := wasmfmt.AppendU32(nil, n)
	for _, t := range tables {
		max := uint64(t.lim.Min) + room // at most maxEntries: fits uint32
		if !t.lim.HasMax || uint64(t.lim.Max) > max {
			t.lim.Max, t.lim.HasMax = uint32(max), true
		}
		out = append(wasmfmt.AppendLimits(append(out, t.head...), t.lim), t.tail...)
	}
	return out, nil
}

// describe says what the tables' minimums claim, for an error.
func describe(tables []tableType, mins uint64) string {
	if len(tables) == 1 {
		return fmt.Sprintf("table 0 declares a minimum of %d entries", mins)
	}
	s := "tables declare minimums of"
	for i, t := range tables {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d (table %d)", t.lim.Min, i)
	}
	return fmt.Sprintf("%s: %d entries in all", s, mins)
}
