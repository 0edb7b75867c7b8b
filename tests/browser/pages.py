"""Helpers the browser tests share: waiting, logging into admin, running a changelist action."""

import json
from urllib.parse import urlsplit

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.workspace.factories import UserFactory

PASSWORD = "a browser's own password 42"
TIMEOUT = 15


def wait(driver, timeout: float = TIMEOUT) -> WebDriverWait:
    return WebDriverWait(driver, timeout)


def make_superuser(email: str = "browser-operator@example.com"):
    """A superuser whose password the live service can check: the tests hash with MD5 for speed, which the service
    does not accept, so the hash is PBKDF2's, made here."""
    user = UserFactory(email=email, is_staff=True, is_superuser=True)
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.save(update_fields=["password"])
    return user


def admin_login(driver, base_url: str, user) -> None:
    driver.get(f"{base_url}/admin/login/?next=/admin/")
    driver.find_element(By.ID, "id_username").send_keys(user.email)
    driver.find_element(By.ID, "id_password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "#login-form [type=submit]").click()
    # The login page has no user tools; the index, where the form sends a logged-in operator, does.
    wait(driver).until(EC.presence_of_element_located((By.ID, "user-tools")))
    assert urlsplit(driver.current_url).path == "/admin/", driver.current_url


def run_action(driver, changelist_url: str, pk, action: str) -> str:
    """Tick the row of `pk` on the changelist, run `action` and return the text of the messages shown."""
    driver.get(changelist_url)
    checkbox = driver.find_element(By.CSS_SELECTOR, f"input.action-select[value='{pk}']")
    checkbox.click()
    # Admin's actions.js (so its JavaScript loaded) marks the ticked row and counts it.
    wait(driver).until(lambda _: "selected" in checkbox.find_element(By.XPATH, "./ancestor::tr").get_attribute("class"))
    assert driver.find_element(By.CSS_SELECTOR, ".action-counter").text.startswith("1 of "), "actions.js did not run"
    Select(driver.find_element(By.NAME, "action")).select_by_value(action)
    driver.find_element(By.CSS_SELECTOR, "#changelist-form button[name=index]").click()
    return wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, "ul.messagelist"))).text


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for since the performance log was last read (Chrome's DevTools events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
