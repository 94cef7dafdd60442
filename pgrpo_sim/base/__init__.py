"""Foundation shared by every layer: the error type, argument checks, regime enumerations, the small fused
kernels (short-axis sums, the Threefry hash), the choice of autodiff mode, batches spread over devices, and what
long work needs from its process without owning it: the atomic write, the progress callback, numbers as JSON, the
jit compiler options and the interruptible wait. Imports nothing else from pgrpo_sim."""
