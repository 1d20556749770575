def more(value):
    raise ValueError(f"nested module value {value}")  # line 2
