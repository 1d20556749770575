# ruff: noqa
# fmt: off
# Excerpt: the raise site of seed record 129d60f3f6e5f4e0.


def weight_loader_v2(param, loaded_weight, per_tensor_scale_parameter):
    if isinstance(param, per_tensor_scale_parameter):
        if loaded_weight.numel() != 1:
            raise ValueError(
                "Expected scalar scale for fused-in-checkpoint "
                "merged-column checkpoint load, got shape "
                f"{tuple(loaded_weight.shape)}"
            )
