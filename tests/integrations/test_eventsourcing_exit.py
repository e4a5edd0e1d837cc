"""An eventsourcing System on braidlog ends as it does on SQLite: a script that runs one under
a SingleThreadedRunner, stops it and exits prints nothing but its own output (no "Exception
ignored in: <function Application.__del__ …>" from the applications finalized at exit). Run in a
real interpreter, since it is the interpreter's exit that is tested."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("eventsourcing")

SCRIPT = textwrap.dedent('''
    import sys
    from eventsourcing.application import Application
    from eventsourcing.dispatch import singledispatchmethod
    from eventsourcing.domain import Aggregate, event
    from eventsourcing.system import ProcessApplication, SingleThreadedRunner, System


    class Dog(Aggregate):
        @event("Registered")
        def __init__(self, name):
            self.name = name


    class School(Application):
        def register(self, name):
            dog = Dog(name)
            self.save(dog)
            return dog.id


    class Counter(ProcessApplication):
        @singledispatchmethod
        def policy(self, domain_event, processing_event):
            pass


    system = System(pipes=[[School, Counter]])
    runner = SingleThreadedRunner(system, env={
        "PERSISTENCE_MODULE": "braidlog.integrations.eventsourcing", "BRAIDLOG_STORE": sys.argv[1]})
    runner.start()
    school = runner.get(School)
    school.register("Fido")
    school.register("Rex")
    print(school.recorder.max_notification_id(), runner.get(Counter).recorder.max_tracking_id("School"))
    runner.stop()
    print("stopped")
''')


def test_a_system_stopped_then_the_interpreter_exiting_prints_no_traceback(tmp_path):
    script = tmp_path / "system.py"
    script.write_text(SCRIPT)
    for events in (2, 4):  # a second run opens the store the first one wrote
        done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{events} {events}\nstopped\n"  # every event processed downstream
        assert done.stderr == ""
