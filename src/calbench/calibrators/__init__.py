"""Post-hoc calibrators: logits in, calibrated probabilities out (see ``base`` for the contract).

Importing this package imports every calibrator module, so :data:`REGISTRY` holds all of
``uncalibrated ts vs vs_b ms_b ts_sbece hist iso bbq platt dirichlet dir_odir_cv ms_odir_cv dir_l2_cv
beta venn_abers ets cir svs sms spline``.  The modules import only
numpy at load time; torch and scipy are imported inside the functions that need them.
"""

from calbench.calibrators.base import (
    REGISTRY,
    Calibrator,
    get_calibrator,
    load_calibrator,
    register,
    save_calibrator,
)
from calbench.calibrators.beta import BetaCalibration
from calbench.calibrators.binning import BBQ, HistogramBinning
from calbench.calibrators.cir import CenteredIsotonic
from calbench.calibrators.dirichlet import DirichletCalibration
from calbench.calibrators.ets import EnsembleTemperatureScaling
from calbench.calibrators.isotonic import IsotonicCalibration
from calbench.calibrators.odir_cv import DirichletL2CV, DirichletODIRCV, MatrixScalingODIRCV
from calbench.calibrators.platt import PlattScaling
from calbench.calibrators.sbece import TemperatureScalingSBECE
from calbench.calibrators.scaling import (
    MatrixScalingBias,
    TemperatureScaling,
    VectorScaling,
    VectorScalingBias,
)
from calbench.calibrators.spline import SplineCalibration
from calbench.calibrators.structured import StructuredMatrixScaling, StructuredVectorScaling
from calbench.calibrators.uncalibrated import Uncalibrated
from calbench.calibrators.venn_abers import VennAbers

__all__ = [
    "BBQ",
    "REGISTRY",
    "BetaCalibration",
    "Calibrator",
    "CenteredIsotonic",
    "DirichletCalibration",
    "DirichletL2CV",
    "DirichletODIRCV",
    "EnsembleTemperatureScaling",
    "HistogramBinning",
    "IsotonicCalibration",
    "MatrixScalingBias",
    "MatrixScalingODIRCV",
    "PlattScaling",
    "SplineCalibration",
    "StructuredMatrixScaling",
    "StructuredVectorScaling",
    "TemperatureScaling",
    "TemperatureScalingSBECE",
    "Uncalibrated",
    "VennAbers",
    "VectorScaling",
    "VectorScalingBias",
    "get_calibrator",
    "load_calibrator",
    "register",
    "save_calibrator",
]
