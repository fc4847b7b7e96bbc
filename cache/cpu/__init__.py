"""The CPU decode path: AVX2 kernels (csrc/, built on first use) and the per-shape choice of weight layout."""
