import subprocess, sys, time, socket
PY=sys.executable
s=subprocess.Popen([PY,"tasks_upstream.py","18933"])
try:
    for _ in range(100):
        with socket.socket() as c:
            if c.connect_ex(("127.0.0.1",18933))==0: break
        time.sleep(0.1)
    r=subprocess.run([PY,"wire_probe.py","http://127.0.0.1:18933/mcp"],capture_output=True,text=True,timeout=90)
    print(r.stdout); print(r.stderr[-2000:])
finally:
    s.terminate(); s.wait(10)
