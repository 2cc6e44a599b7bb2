"""The example the README points to runs as written."""
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "quickstart.py"


def test_quickstart_runs():
    result = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "predicted classes" in result.stdout and "step 199" in result.stdout
    final_accuracy = float(result.stdout.split("step 199:")[1].split("accuracy")[1].split()[0])
    assert final_accuracy >= 0.85
