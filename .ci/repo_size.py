"""Keep the repository light: refuse a tracked file over 10 MB (the two shipped checkpoints
excepted) and a tracked tree over 40 MB. Sizes are those of the working tree's tracked files."""

import subprocess
import sys
from pathlib import Path

MAX_FILE_MB = 10
MAX_TREE_MB = 40
SHIPPED = {"model/equitabpfn-small.pt", "model/tabpfn-star-small.pt"}

root = Path(__file__).resolve().parents[1]
names = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout.decode().split("\0")
sizes = {name: (root / name).stat().st_size for name in names if name and (root / name).is_file()}
total = sum(sizes.values()) / 1e6
largest = max(sizes, key=sizes.get)
too_large = [f"{name} ({size / 1e6:.1f} MB)" for name, size in sizes.items()
             if size > MAX_FILE_MB * 1e6 and name not in SHIPPED]
print(f"tracked: {len(sizes)} files, {total:.1f} MB; largest {largest} ({sizes[largest] / 1e6:.1f} MB)")
if too_large:
    sys.exit(f"error: tracked files over {MAX_FILE_MB} MB (keep them outside git): {', '.join(too_large)}")
if total > MAX_TREE_MB:
    sys.exit(f"error: the tracked tree is {total:.1f} MB, over {MAX_TREE_MB} MB: keep results and states outside git")
