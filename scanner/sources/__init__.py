"""Sources turn inputs (files, stdin, rendered charts, live clusters) into an ``Inventory``.

Each source module exposes plain functions that return an ``Inventory``; every YAML
text goes through ``yamldoc.parse_stream`` so objects from all sources carry the same
origins and line maps. Bad input becomes data (``InvalidDocument``, ``ReadError``),
never an exception, except for usage errors the user can fix before the scan starts.
"""
