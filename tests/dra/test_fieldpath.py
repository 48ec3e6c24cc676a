"""dra.fieldpath renders paths and errors the way apimachinery's field package does."""

from gpuclaim.dra.fieldpath import ErrorType, FieldError, Path, join_errors


def test_path_rendering() -> None:
    p = Path.root("spec").child("devices", "requests").index(0).child("exactly", "selectors").index(1)
    assert str(p.child("cel", "expression")) == "spec.devices.requests[0].exactly.selectors[1].cel.expression"
    assert str(Path.root("metadata").child("labels").key("app")) == "metadata.labels[app]"


def test_error_bodies_follow_apimachinery() -> None:
    count = Path.root("spec").child("devices", "requests").index(0).child("exactly", "count")
    assert str(FieldError.invalid(count, 0, "must be greater than zero")) == (
        "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"
    )
    assert str(FieldError.required(Path.root("spec", "driver"))) == "spec.driver: Required value"
    assert str(FieldError.not_supported(Path.root("mode"), "Some", ["ExactCount", "All"])) == (
        'mode: Unsupported value: "Some": supported values: "ExactCount", "All"'
    )
    assert str(FieldError.too_long(Path.root("x"), "y" * 5, 4)) == "x: Too long: may not be more than 4 bytes"
    assert FieldError.forbidden(Path.root("x"), "no").type is ErrorType.FORBIDDEN


def test_join_begins_with_the_count() -> None:
    errors = [FieldError.required(Path.root("a")), FieldError.required(Path.root("b"))]
    assert join_errors(errors) == "2 errors: a: Required value; b: Required value"
    assert join_errors(errors[:1]) == "a: Required value"
    assert join_errors([]) == ""


def test_a_message_of_thousands_of_errors_is_bounded_and_says_how_many_were_left_out() -> None:
    errors = [FieldError.invalid(Path.root("spec", "containers").index(i).child("resources"), "x" * 5000, "bad")
              for i in range(5000)]
    message = join_errors(errors)
    assert message.startswith("5000 errors: spec.containers[0].resources: Invalid value: ")
    assert len(message) <= 8192 + 100
    shown = message.count("Invalid value")
    assert message.endswith(f"... and {5000 - shown} more errors not shown")
    assert "more characters)" in message  # one huge value does not fill the message
