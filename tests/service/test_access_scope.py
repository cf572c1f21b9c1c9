"""Who passes ALL: the local caller, the shared token and admin keys; a key with groups reads within them."""

from switchyard.run_context import ALL
from switchyard.service.keys import LOCAL, TOKEN, FileKeyStore


def test_only_local_token_and_admin_keys_read_everything(tmp_path):
    keys = FileKeyStore(tmp_path / "keys.json")
    admin = keys.verify(keys.create("ops", None, admin=True))
    staff = keys.verify(keys.create("staff", "c", groups="hr,finance"))
    nobody = keys.verify(keys.create("reader", "c"))
    assert LOCAL.scope is ALL and TOKEN.scope is ALL and admin.scope is ALL
    assert staff.scope == ("finance", "hr") and nobody.scope == ()
