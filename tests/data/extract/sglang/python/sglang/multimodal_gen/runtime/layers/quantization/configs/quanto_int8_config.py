# ruff: noqa
# fmt: off
# Excerpt: the raise site of seed record 5c84e15f4be2c1a6.


def check_scale(prefix, scale_slice, scale_shape, ok):
    if not ok:
        raise ValueError(
            f"Quanto layer {prefix!r} has incompatible scale "
            f"{scale_slice.get_dtype()} {scale_shape}"
        )
