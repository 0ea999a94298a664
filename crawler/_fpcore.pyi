from typing_extensions import Buffer

def fingerprint(units: Buffer, runs: Buffer, judged_units: Buffer | None, judged_runs: Buffer | None,
                sample: int, /) -> tuple[int, bytes, bytes, bytes]: ...
