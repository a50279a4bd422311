"""Whether two weights files hold the same tensors within DESIGN.md's
tolerance (max|a-b| <= 1e-5 * max|b| per tensor), printing the worst
relative error: for runs whose gradients add up in another order.

Usage: close_weights.py A.safetensors B.safetensors
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import st  # noqa: E402


def main():
    a, b = st.load(sys.argv[1])[0], st.load(sys.argv[2])[0]
    if sorted(a) != sorted(b):
        print("different tensors")
        return 1
    worst = 0.0
    for name in a:
        scale = b[name].abs().max().item()
        diff = (a[name] - b[name]).abs().max().item()
        worst = max(worst, diff / scale if scale > 0 else diff)
    ok = worst <= 1e-5
    print(f"{'close' if ok else 'DIFFERENT'} ({len(a)} tensors, worst relative "
          f"error {worst:.1e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
