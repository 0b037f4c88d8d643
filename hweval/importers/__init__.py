"""Importers: measurements people already have, parsed whole, then written to the store with provenance.

Each importer parses every input file completely before anything is written
(:func:`hweval.importers.common.parse_all`), so a malformed line anywhere
means one :class:`~hwcore.errors.InputError` naming the file and line, exit
code 2, and an unchanged store. Every record carries its provenance in
``params``: ``source_path``, ``source_sha256``, ``source_line``, ``importer``
and ``importer_version``.

* :mod:`hweval.importers.nccl_tests`: raw nccl-tests stdout (any collective).
* :mod:`hweval.importers.mlperf`: MLPerf Training result logs (``:::MLLOG``)
  and system description JSON.
"""

IMPORTERS = ("nccl-tests", "mlperf")
