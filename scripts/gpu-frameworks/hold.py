"""(i) holds 1 GiB of device memory and keeps working until killed; gpu-frameworks.sh kills it with
SIGKILL after READY and checks that nothing of it stays on the device."""
import json
import time

from common import setup

torch = setup()
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
x.fill_(7)
torch.cuda.synchronize()
print("READY " + json.dumps({"held_bytes": x.numel()}), flush=True)
y = torch.randn(2048, 2048, device="cuda")
t_end = time.time() + 120
while time.time() < t_end:  # busy on the device when the kill lands
    y = (y @ y).tanh()
    torch.cuda.synchronize()
