"""A saved `specviz bench --out` result, apart from the benchmark that writes it.

setting (one point of a sweep: BenchSetting, and its labels), records (what one request
measured under one setting, and the arithmetic every table shares), schema (the file's shape,
migrate() from any older one, read_result()), table (the one Markdown table every result table
renders through) and saved (the saved results in a folder, and which has the most to show).
"""
