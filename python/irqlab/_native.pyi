"""Type stubs of the native module (python/src/lib.rs)."""

from typing import List, Optional, Tuple

class IrqlabInputError(ValueError):
    message: str
    file: str
    line: int
    column: int

def analyze(source: str, file: str, base_dir: str, test: str = "rta", bound: str = "refined") -> str: ...
def fit(curve: str, curve_name: str, baseline: Optional[str] = None, baseline_name: Optional[str] = None) -> str: ...
def bounds(period_ns: int, wcet_ns: int, windows_ns: List[int]) -> List[Tuple[int, int, int, int, float]]: ...
def parse_duration(text: str) -> int: ...
