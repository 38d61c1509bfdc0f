// SPDX-License-Identifier: BSD-3-Clause
#include "python_errors.hpp"

#include <map>

#include "ex2d/exit_codes.hpp"

namespace py = pybind11;

namespace ex2d::python {
namespace {

/// The classes by exit code; they live as long as the module (the interpreter keeps it).
std::map<int, PyObject*>& classes()
{
    static std::map<int, PyObject*> by_code;
    return by_code;
}

PyObject* define(py::module_& m, const char* name, PyObject* bases, int exit_code, const char* doc)
{
    const std::string qualified = std::string("ex2d.") + name;
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
    if (type == nullptr) throw py::error_already_set();
    py::handle(type).attr("exit_code") = exit_code;
    m.add_object(name, py::handle(type));
    classes()[exit_code] = type;
    return type;
}

}  // namespace

void define_exceptions(py::module_& m)
{
    PyObject* base = define(m, "Error", PyExc_Exception, kExitRuntime,
                            "An ex2d error; exit_code says its class");
    const auto pair = [base](PyObject* builtin) {
        return py::make_tuple(py::handle(base), py::handle(builtin)).release().ptr();
    };
    define(m, "ExtractionError", pair(PyExc_RuntimeError), kExitRuntime,
           "The extraction or its backend failed (no device, not compiled, no usable result)");
    define(m, "UsageError", pair(PyExc_ValueError), kExitUsage,
           "An argument or option is wrong; nothing was done");
    define(m, "InputError", pair(PyExc_OSError), kExitInput,
           "An input file is missing, unreadable or not in the expected format");
    define(m, "OutputError", pair(PyExc_OSError), kExitOutput,
           "An output file or its folder cannot be written");
}

void raise(int exit_code, const std::string& message)
{
    const auto found = classes().find(exit_code);
    PyErr_SetString(found == classes().end() ? classes().at(kExitRuntime) : found->second,
                    message.c_str());
    throw py::error_already_set();
}

void raise(const Status& status, int exit_code)
{
    // An argument's error is its own sentence, as the tool prints it (no "invalid argument:").
    raise(exit_code < 0 ? exit_code_for(status) : exit_code,
          status.code() == StatusCode::invalid_argument ? status.message() : status.to_string());
}

void raise_if_error(const Status& status, int exit_code)
{
    if (!status.is_ok()) raise(status, exit_code);
}

}  // namespace ex2d::python
