"""Foundation shared by every layer: the error type, argument checks, regime enumerations, the small fused
kernels (short-axis sums, the Threefry hash), the choice of autodiff mode, batches spread over devices.
Imports nothing else from pgrpo_sim."""
