"""The YAML reader: compose with marks, walk to plain values and line maps, limits."""
