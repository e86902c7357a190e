"""The text form: round-trips, canonical renaming, and one-line parse errors."""
from __future__ import annotations

import pytest

from ir import ParseError, canonical_text, parse, print_graph

TEXT = """graph main(%x0: f32[2,3,8,8], %w1: param f32[4,3,3,3]) {
  %v2 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1], groups=1](%x0, %w1) : f32[2,4,8,8]
  %v3 = reduce_sum[axis=1, keepdim=true](%v2) : f32[2,1,8,8]
  %v4 = cast[to=f64](%v3) : f64[2,1,8,8]
  return %v4, %v2
}
"""


def test_print_parse_round_trip_is_exact():
    g = parse(TEXT)
    assert print_graph(g) == TEXT
    assert parse(print_graph(g)) == g


def test_comments_and_whitespace_are_ignored():
    noisy = "# a seed\n" + TEXT.replace("  %v3", "\n  # reduce\n  %v3")
    assert parse(noisy) == parse(TEXT)


def test_canonical_text_ignores_names():
    renamed = TEXT.replace("%v2", "%conv").replace("%x0", "%image")
    assert parse(renamed) != parse(TEXT)
    assert canonical_text(parse(renamed)) == canonical_text(parse(TEXT))


@pytest.mark.parametrize(
    "text, message",
    [
        (TEXT.replace("conv2d", "conv9d"), "seed.gir:2:9: unknown op 'conv9d'"),
        (TEXT.replace("keepdim=true", "keepdims=true"),
         "seed.gir:3:9: op 'reduce_sum' has no attribute 'keepdims'"),
        (TEXT.replace(", keepdim=true", ""), "seed.gir:3:9: op 'reduce_sum' needs attribute 'keepdim'"),
        (TEXT.replace("axis=1", "axis=[1]"), "seed.gir:3:9: op 'reduce_sum' attribute 'axis': bad value [1]"),
        (TEXT.replace("f64[2,1,8,8]", "f65[2,1,8,8]"),
         "seed.gir:4:29: unknown dtype 'f65' (expected one of: f16, f32, f64, i32, i64, b8)"),
        (TEXT.replace("to=f64", "to=f65"),
         "seed.gir:4:9: op 'cast' attribute 'to': unknown dtype 'f65' (expected one of: f16, f32, f64, i32, i64, b8)"),
        (TEXT.replace("(%v2) : f32[2,1,8,8]", "(%v2) f32[2,1,8,8]"), "seed.gir:3:47: expected ':' but found 'f32'"),
        (TEXT.replace("return", "retrun"), "seed.gir:5:3: expected a value name like %x0 but found 'retrun'"),
        (TEXT + "junk", "seed.gir:7:1: expected end of input but found 'junk'"),
        (TEXT.replace("%v4 = cast", "%v4 = cast$"), "seed.gir:4:13: unexpected character '$'"),
    ],
)
def test_parse_errors_are_one_line_with_location(text: str, message: str):
    with pytest.raises(ParseError) as info:
        parse(text, "seed.gir")
    assert str(info.value) == message
    assert "\n" not in str(info.value)
