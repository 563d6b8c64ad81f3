package wasmbin

// AppendU32 appends v in unsigned LEB128, the binary format's integers.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendName appends a name: its length, then its bytes.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// AppendSection appends a section: its id, its size, then body.
func AppendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = AppendU32(out, uint32(len(body)))
	return append(out, body...)
}

// appendS32 appends v in signed LEB128, as i32.const takes it.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
