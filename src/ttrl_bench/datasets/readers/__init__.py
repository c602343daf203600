"""Source readers: how a dataset's content becomes raw samples, one module per kind.

- `bundled`: the demo sets generated from scikit-learn's digits (`read_digits`, `read_digit_scenes`),
  which need no source at all;
- `rows`: one row of a Hugging Face dataset -> the fields preprocessing needs, per registry entry
  `reader` (`ROW_READERS`, `GEOMETRY_READERS` for the readers that need the image size);
- `images`: a row's image as bytes, relative paths resolved under a local copy (`ImageFiles`).

Which reader runs, and where the rows come from (Hub or local copy), is `datasets/sources.py`.
"""
