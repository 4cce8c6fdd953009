"""`python -m aokun_server.hook ...`, as hook commands written before the admin CLI had its own
package say: starts the hook's entry point, which now lives in aokun_admin/hook.py."""

import runpy

if __name__ == "__main__":
    runpy.run_module("aokun_admin.hook", run_name="__main__", alter_sys=True)
