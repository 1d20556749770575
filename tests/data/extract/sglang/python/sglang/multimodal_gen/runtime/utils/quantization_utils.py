# ruff: noqa
# fmt: off
# Excerpt: the raise site of seed record b9825390f5c3ae68.


def check_rowwise(prefix, weight_shape, scale_shape, marker):
    if len(weight_shape) != 2 or scale_shape != (weight_shape[0], 1):
        raise ValueError(
            f"Comfy INT8 layer {prefix!r} has incompatible weight/scale "
            f"shapes: {weight_shape} and {scale_shape}"
        )
    marker["_is_rowwise"] = True
